"""Bootstrap operator state: list, union list and broadcast state written into a new savepoint (or
added to an operator of an existing one), as Flink writes them.

Operator state is small (sources' splits, a function's buffered elements, broadcast rules), so each
subtask's stream is built here in one piece: the values are encoded with the bulk kernels
(:func:`statemorph.arrow.encode`), laid out by :func:`~statemorph.savepoint.flink.operator_state.
write_operator_stream` under a header of Flink's meta infos, and kept inline in ``_metadata`` below
the inline threshold (a file next to it above).
"""

from __future__ import annotations

import copy
import os
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from .. import arrow
from ..errors import UsageError
from ..savepoint.files import StagedDirectory, output_error
from ..savepoint.flink import FlinkSavepoint
from ..savepoint.flink.assemble import DEFAULT_INLINE_THRESHOLD, envelope, new_metadata
from ..savepoint.flink.envelope import snapshot_from_envelope
from ..savepoint.flink.handles import ByteStreamHandle, OperatorStreamHandle, StreamHandle
from ..savepoint.flink.keyed_header import BROADCAST, OPERATOR, PROXY_VERSION, VALUE_SERIALIZER, StateMetaInfo
from ..savepoint.flink.metadata import OperatorState, SubtaskState
from ..savepoint.flink.operator_ids import operator_id
from ..savepoint.flink.operator_state import KEY_SERIALIZER, OperatorHeader, OperatorStatePart, write_operator_stream
from ..savepoint.flink.operator_state_migrate import new_stream_file
from ..savepoint.flink.operator_state_read import KIND_OF_MODE
from ..typeutils import flink_snapshot, write_versioned_snapshot
from .bootstrap import carry_over, write_metadata

MODE_OF_KIND = {kind: mode for mode, kind in KIND_OF_MODE.items()}
DISTRIBUTION_MODE_OPTION = "OPERATOR_STATE_DISTRIBUTION_MODE"


@dataclass
class OperatorStateData:
    """One operator state to bootstrap. ``kind`` is ``operator-list`` (``getListState``),
    ``union-list`` (``getUnionListState``) or ``broadcast-map`` (``BroadcastState``).

    A list state's ``values`` holds each subtask's elements (a sequence of ``parallelism``
    sequences or Arrow arrays, in the value serializer's Arrow type); a broadcast state's
    ``values`` is its map values and ``keys`` its keys (every subtask holds the same map)."""

    kind: str
    value_serializer: Any
    values: Any
    key_serializer: Any = None
    keys: Any = None


def _snapshot(serializer: Any) -> Any:
    return snapshot_from_envelope(envelope(write_versioned_snapshot(flink_snapshot(serializer))))


def _meta(name: str, sd: OperatorStateData) -> StateMetaInfo:
    """The state's meta info as Flink writes it (broadcast: value serializer before key serializer)."""
    mode = MODE_OF_KIND.get(sd.kind)
    if mode is None:
        raise UsageError(f"operator state {name!r}: kind must be one of {', '.join(MODE_OF_KIND)}, got {sd.kind!r}")
    serializers = [(VALUE_SERIALIZER, _snapshot(sd.value_serializer))]
    if mode == "BROADCAST":
        if sd.key_serializer is None:
            raise UsageError(f"broadcast state {name!r} needs a key_serializer")
        serializers.append((KEY_SERIALIZER, _snapshot(sd.key_serializer)))
    return StateMetaInfo(name, BROADCAST if mode == "BROADCAST" else OPERATOR, [(DISTRIBUTION_MODE_OPTION, mode)],
                         serializers)


def _encoded(values: Any, serializer: Any) -> list[bytes]:
    array = values if isinstance(values, pa.Array | pa.ChunkedArray) else pa.array(list(values))
    out: list[bytes] = arrow.encode(array, serializer).to_pylist()
    return out


def _parts(states: Mapping[str, OperatorStateData], metas: dict[str, StateMetaInfo],
           parallelism: int) -> list[list[OperatorStatePart]]:
    """Each subtask's parts, every value encoded once."""
    per_subtask: list[list[OperatorStatePart]] = [[] for _ in range(parallelism)]
    for name, sd in states.items():
        meta = metas[name]
        mode = MODE_OF_KIND[sd.kind]
        if mode == "BROADCAST":
            keys, values = _encoded(sd.keys, sd.key_serializer), _encoded(sd.values, sd.value_serializer)
            if len(keys) != len(values):
                raise UsageError(f"broadcast state {name!r}: {len(keys)} keys but {len(values)} values")
            entries = list(zip(keys, values, strict=True))
            for parts in per_subtask:
                parts.append(OperatorStatePart(name, mode, meta, [], entries, len(entries)))
            continue
        lists = list(sd.values) if isinstance(sd.values, Sequence) else sd.values
        if len(lists) != parallelism:
            raise UsageError(f"operator state {name!r}: values for {len(lists)} subtasks, parallelism is {parallelism}")
        for parts, elements in zip(per_subtask, lists, strict=True):
            encoded = _encoded(elements, sd.value_serializer)
            parts.append(OperatorStatePart(name, mode, meta, encoded, None, len(encoded)))
    return per_subtask


def write_operator_state_savepoint(dst: str | os.PathLike[str], *, operator: str,
                                   states: Mapping[str, OperatorStateData], parallelism: int = 1,
                                   max_parallelism: int = 128, inline_threshold: int = DEFAULT_INLINE_THRESHOLD,
                                   base: str | os.PathLike[str] | None = None) -> dict[str, int]:
    """Write the new Flink savepoint ``dst`` with the operator states ``states`` of the operator
    with uid ``operator`` at ``parallelism``. With ``base`` (an existing savepoint, only read) the
    states join its operator of that uid (a keyed operator bootstrapped before, at the same
    parallelism and without operator state) or a new operator, every other operator and file
    carried over. Returns the entries written per state (all subtasks). ``dst`` appears complete
    or not at all."""
    if not states:
        raise UsageError("a bootstrapped operator needs at least one operator state")
    if not operator:
        raise UsageError("the operator needs a uid (the restoring job sets the same uid on its operator)")
    metas = {name: _meta(name, sd) for name, sd in states.items()}
    header = OperatorHeader(PROXY_VERSION, False, [m for m in metas.values() if m.backend_type == OPERATOR],
                            [m for m in metas.values() if m.backend_type == BROADCAST])
    per_subtask = _parts(states, metas, parallelism)
    source = FlinkSavepoint(base) if base is not None else None
    meta = copy.deepcopy(source.metadata) if source is not None else new_metadata([])
    op = next((o for o in meta.operators if o.operator_id == operator_id(operator)), None)
    if op is None:
        op = OperatorState(operator_id(operator), parallelism, max_parallelism, None,
                           [SubtaskState(index=i) for i in range(parallelism)], operator, operator)
        meta.operators.append(op)
    elif op.parallelism != parallelism or any(st.managed_operator is not None for st in op.subtasks or []):
        raise UsageError(f"{base} has operator {operator!r} at parallelism {op.parallelism}"
                         f"{' with operator state' if op.parallelism == parallelism else ''}: operator state joins "
                         f"an operator at the same parallelism without any")
    try:
        with StagedDirectory(dst, source=base) as staged:
            for st, parts in zip(op.subtasks or [], per_subtask, strict=True):
                data, infos = write_operator_stream(header, parts)
                st.managed_operator_flag = 1
                st.managed_operator = OperatorStreamHandle(infos, _delegate(staged.temp, data, inline_threshold))
            if source is not None:
                carry_over(source, meta, set(), staged.temp)
            write_metadata(staged.temp, meta)
    except OSError as e:
        raise output_error(e, dst, "write the Flink savepoint") from e
    return {name: sum(p.count for parts in per_subtask for p in parts if p.name == name) for name in states}


def _delegate(directory: Any, data: bytes, threshold: int) -> StreamHandle:
    """Inline below Flink's inline threshold, else a new file next to ``_metadata``."""
    if len(data) < threshold:
        return ByteStreamHandle(str(uuid.uuid4()), data)
    return new_stream_file(directory, data)


__all__ = ["OperatorStateData", "write_operator_state_savepoint"]
