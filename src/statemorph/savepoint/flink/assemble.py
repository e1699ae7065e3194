"""Building keyed-state streams and whole savepoints from rows: the writer half of a Python State
Processor API (bootstrap a new savepoint, re-partition one to another max parallelism).

Rows come in one column shape for every state of an operator (:data:`ROWS_SCHEMA`: the reader's
columns plus the ``state`` id in the header), sorted by subtask, key group and state (and, for
list state, by key and ``index``), so one pass writes each subtask's stream in ascending key-group
order with memory bounded by one key group. The same code runs locally and inside a Spark task
(:class:`SubtaskStreams` takes batches in any chunking and hands back each finished stream's
handle as bytes, the form ``_metadata`` stores).

The streams are Flink's canonical format (``KeyedBackendSerializationProxy`` v6 header, key-group
blocks, optional Snappy framing), the ``_metadata`` is version 6 with the operator's uid, its
OperatorID (:func:`~.operator_ids.operator_id`) and ``CheckpointProperties`` of a canonical savepoint.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ... import serializers as _serializers  # noqa: F401  (registers the snapshot classes headers name)
from ...errors import FlinkSavepointError
from ...io import DataInputDeserializer, DataOutputSerializer
from ...keyed.keygroups import key_group_range_for_operator
from ...typeutils import CompositeTypeSerializerSnapshot, SnapshotRegistry
from .envelope import (
    ENVELOPE_VERSION,
    LIST_SNAPSHOT,
    MAP_SNAPSHOT,
    TIMER_SNAPSHOT,
    TTL_SNAPSHOT,
    Snapshot,
    snapshot_from_envelope,
)
from .handles import KeyGroupsHandle, read_keyed_handle, write_keyed_handle
from .identity import checkpoint_properties
from .keyed_blocks import StateRun, encode_key_group
from .keyed_header import (
    KEY_VALUE,
    KEYED_STATE_TYPE,
    NAMESPACE_SERIALIZER,
    PRIORITY_QUEUE,
    PROXY_VERSION,
    VALUE_SERIALIZER,
    KeyedHeader,
    StateMetaInfo,
    parse_keyed_header,
)
from .keyed_writer import KeyedStreamWriter, entries_from_batch
from .layout import StateLayout
from .metadata import CheckpointMetadata, OperatorState, SubtaskState
from .operator_ids import operator_id

NEW_METADATA_VERSION = 6
"""``_metadata`` version of the savepoints statemorph creates (what Flink 2.1+ writes and reads)."""
BOOTSTRAP_CHECKPOINT_ID = 0
"""Checkpoint id of a created savepoint (the State Processor API's ``SnapshotUtils.CHECKPOINT_ID``)."""
DEFAULT_INLINE_THRESHOLD = 20 * 1024
FLINK_STATE_TYPES = {"value": "VALUE", "list": "LIST", "map": "MAP", "reducing": "REDUCING",
                     "aggregating": "AGGREGATING"}

ROWS_SCHEMA = pa.schema([
    pa.field("subtask", pa.int32(), nullable=False),
    pa.field("key_group", pa.int32(), nullable=False),
    pa.field("state", pa.int32(), nullable=False),
    pa.field("key", pa.binary(), nullable=False),
    pa.field("namespace", pa.binary(), nullable=False),
    pa.field("user_key", pa.binary()),
    pa.field("index", pa.int32()),
    pa.field("value", pa.binary()),
    pa.field("ttl_timestamp", pa.int64()),
    pa.field("timestamp", pa.int64()),
    pa.field("value_bytes", pa.binary()),
])
"""Every state's rows in one shape: the reader's columns (:func:`~.reader.flink_state_schema`),
null where a kind has no such column, plus the owning ``subtask`` and the ``state`` id
(``value_bytes``: the whole Flink value of a state kept whole, :func:`.layout.whole_values`)."""
SORT_KEYS = ["subtask", "key_group", "state", "key", "namespace", "user_key", "index", "timestamp"]
"""The order :class:`SubtaskStreams` needs (and the local and Spark paths sort by)."""


def envelope(snapshot_bytes: bytes) -> bytes:
    """Versioned snapshot bytes in the top-level form a header holds (``i32 2`` first)."""
    out = DataOutputSerializer()
    out.write_int(ENVELOPE_VERSION)
    out.write(snapshot_bytes)
    return out.get_copy_of_buffer()


_COMPOSITE_VERSION = 3
_OUTER_VERSIONS = {LIST_SNAPSHOT: 1, MAP_SNAPSHOT: 1, TTL_SNAPSHOT: 2, TIMER_SNAPSHOT: 2}
"""Outer snapshot versions Flink 2.x writes for the wrappers a keyed state's value serializer can
have (``ListSerializerSnapshot``, ``MapSerializerSnapshot``, ``TtlStateFactory$TtlSerializerSnapshot``)
and for a timer queue's ``TimerSerializerSnapshot(key, namespace)``."""
TIMER_QUEUE_PREFIXES = ("_timer_state/event_", "_timer_state/processing_")
"""How Flink names the two timer queues of a timer service (``InternalTimeServiceManagerImpl``):
a window operator's ``window-timers``, a process function's ``user-timers``."""


def wrapper_snapshot(class_name: str, nested: list[bytes]) -> bytes:
    """The versioned snapshot bytes of a List / Map / TTL wrapper around ``nested`` versioned
    snapshots: a ``CompositeTypeSerializerSnapshot`` with an empty outer part (what Flink writes
    for them)."""
    out = DataOutputSerializer()
    out.write_utf(class_name)
    out.write_int(_COMPOSITE_VERSION)
    out.write_int(CompositeTypeSerializerSnapshot.MAGIC)
    out.write_int(_OUTER_VERSIONS[class_name])
    out.write_int(CompositeTypeSerializerSnapshot.DELEGATE_MAGIC)
    out.write_int(CompositeTypeSerializerSnapshot.DELEGATE_VERSION)
    out.write_int(len(nested))
    for n in nested:
        out.write(n)
    return out.get_copy_of_buffer()


def state_value_snapshot(kind: str, value: bytes, user_key: bytes | None = None, ttl: bytes | None = None) -> bytes:
    """A state's VALUE_SERIALIZER snapshot from its per-value snapshot: wrapped in TTL (``ttl`` =
    the timestamp's LongSerializer snapshot) when the state has TTL, then in List or Map."""
    inner = wrapper_snapshot(TTL_SNAPSHOT, [ttl, value]) if ttl is not None else value
    if kind == "list":
        return wrapper_snapshot(LIST_SNAPSHOT, [inner])
    if kind == "map":
        if user_key is None:
            raise FlinkSavepointError("map state needs a user key serializer snapshot")
        return wrapper_snapshot(MAP_SNAPSHOT, [user_key, inner])
    return inner


def new_state_meta(name: str, kind: str, value_snapshot: bytes, namespace_snapshot: bytes,
                   registry: SnapshotRegistry | None = None) -> StateMetaInfo:
    """A KEY_VALUE state's meta info as Flink writes it: ``KEYED_STATE_TYPE`` and the value
    serializer (List / Map wrapped for those kinds) before the namespace serializer (Java HashMap
    order). Snapshots are versioned snapshot bytes in Flink's classes."""
    if kind not in FLINK_STATE_TYPES:
        raise FlinkSavepointError(f"state {name!r}: kind {kind!r} is not one of {', '.join(FLINK_STATE_TYPES)}")
    return StateMetaInfo(name, KEY_VALUE, [(KEYED_STATE_TYPE, FLINK_STATE_TYPES[kind])], [
        (VALUE_SERIALIZER, snapshot_from_envelope(envelope(value_snapshot), registry)),
        (NAMESPACE_SERIALIZER, snapshot_from_envelope(envelope(namespace_snapshot), registry)),
    ])


def new_timer_meta(name: str, key_snapshot: bytes, namespace_snapshot: bytes,
                   registry: SnapshotRegistry | None = None) -> StateMetaInfo:
    """A timer queue's meta info as Flink writes it: a PRIORITY_QUEUE state with no options
    whose VALUE_SERIALIZER is ``TimerSerializerSnapshot(key, namespace)`` (versioned snapshot
    bytes); ``name`` is one of :data:`TIMER_QUEUE_PREFIXES` and the timer service's name."""
    if not name.startswith(TIMER_QUEUE_PREFIXES) or name in TIMER_QUEUE_PREFIXES:
        raise FlinkSavepointError(f"timer queue {name!r}: Flink names timer queues "
                                  f"{' or '.join(p + '<service>' for p in TIMER_QUEUE_PREFIXES)}")
    timer = wrapper_snapshot(TIMER_SNAPSHOT, [key_snapshot, namespace_snapshot])
    value = snapshot_from_envelope(envelope(timer), registry)
    return StateMetaInfo(name, PRIORITY_QUEUE, [], [(VALUE_SERIALIZER, value)])


def new_keyed_header(key_snapshot: bytes, states: list[StateMetaInfo], compressed: bool = False,
                     registry: SnapshotRegistry | None = None) -> KeyedHeader:
    """The keyed-state header of a new stream; a state's position is its state id."""
    key: Snapshot = snapshot_from_envelope(envelope(key_snapshot), registry)
    return KeyedHeader(PROXY_VERSION, compressed, key, list(states))


def subtask_of(key_groups: np.ndarray, max_parallelism: int, parallelism: int) -> np.ndarray:
    """``KeyGroupRangeAssignment.computeOperatorIndexForKeyGroup`` for every key group."""
    return (key_groups.astype(np.int64) * parallelism // max_parallelism).astype(np.int32)


_EMPTY = pa.scalar(b"", pa.binary())


def columnar_entries(layout: StateLayout, key_group: int,
                     rows: pa.RecordBatch) -> tuple[list[bytes], list[bytes]] | None:
    """The composite keys and Flink values of one key group's rows of one value / reducing /
    aggregating / map state without TTL, built column-wise (the same bytes as
    :func:`entries_from_batch`, which handles every other case); None when the layout needs the
    per-row path (list, timers, TTL, length-suffixed keys)."""
    if layout.kind not in ("value", "reducing", "aggregating", "map") or layout.ttl or layout.ambiguous:
        return None
    groups = rows.column("key_group")
    if pc.any(pc.not_equal(groups, key_group)).as_py():
        raise FlinkSavepointError(f"a row of another key group among those of {key_group}")
    head = pa.scalar(bytes((key_group,)) if layout.prefix == 1 else key_group.to_bytes(2, "big"), pa.binary())
    parts = [head, rows.column("key"), rows.column("namespace")]
    value = rows.column("value")
    if layout.kind == "map":
        parts.append(rows.column("user_key"))
        present = pc.binary_join_element_wise(pa.scalar(b"\x00", pa.binary()), value, _EMPTY)
        value = pc.if_else(pc.is_null(value), pa.scalar(b"\x01", pa.binary()), present)
    elif value.null_count:
        raise FlinkSavepointError(f"{layout.where}: a null value (only map state stores null values)")
    keys = pc.binary_join_element_wise(*parts, _EMPTY)
    if keys.null_count:
        raise FlinkSavepointError(f"{layout.where}: a row without a key, namespace or user key")
    return keys.to_pylist(), value.to_pylist()


class _KeyGroupAssembler:
    """Collects the rows of one key group (across batch boundaries) and turns them into the
    key group's state runs once the next key group starts."""

    def __init__(self, layouts: list[StateLayout]) -> None:
        self.layouts = layouts
        self.key_group = -1
        self.parts: list[pa.RecordBatch] = []

    def feed(self, batch: pa.RecordBatch) -> Iterator[tuple[int, list[StateRun]]]:
        kgs = batch.column("key_group").to_numpy(zero_copy_only=False)
        cuts = np.flatnonzero(np.diff(kgs)) + 1
        starts = [0, *cuts.tolist()]
        ends = [*cuts.tolist(), len(kgs)]
        for a, b in zip(starts, ends, strict=True):
            kg = int(kgs[a])
            if kg != self.key_group:
                if kg < self.key_group:
                    raise FlinkSavepointError(f"key group {kg} after {self.key_group}: rows are not sorted")
                yield from self.finish()
                self.key_group = kg
            self.parts.append(batch.slice(a, b - a))

    def finish(self) -> Iterator[tuple[int, list[StateRun]]]:
        if not self.parts:
            return
        rows = pa.Table.from_batches(self.parts).combine_chunks().to_batches()[0]
        self.parts = []
        states = rows.column("state").to_numpy(zero_copy_only=False)
        cuts = np.flatnonzero(np.diff(states)) + 1
        runs: dict[int, StateRun] = {}
        for a, b in zip([0, *cuts.tolist()], [*cuts.tolist(), len(states)], strict=True):
            sid = int(states[a])
            if not 0 <= sid < len(self.layouts):
                raise FlinkSavepointError(f"state id {sid} is not in the header ({len(self.layouts)} states)")
            run = runs.setdefault(sid, StateRun(sid, [], []))
            part = rows.slice(a, b - a)
            fast = columnar_entries(self.layouts[sid], self.key_group, part)
            if fast is not None:
                run.keys.extend(fast[0])
                run.values.extend(fast[1])
                continue
            for kg, k, v in entries_from_batch(self.layouts[sid], part):
                if kg != self.key_group:
                    raise FlinkSavepointError(f"a row of key group {kg} among those of {self.key_group}")
                run.keys.append(k)
                run.values.append(v)
        yield self.key_group, [runs[s] for s in sorted(runs)]


@dataclass(frozen=True)
class PartInfo:
    """A part file of one subtask's stream: its key groups, where each starts, its size."""

    subtask: int
    name: str
    key_groups: list[int]
    offsets: list[int]
    size: int
    entries: int


class _PartFile:
    """Encoded key groups of one subtask written back to back into ``.parts/`` of the directory."""

    def __init__(self, directory: str, subtask: int, compressed: bool) -> None:
        self.subtask, self.compressed = subtask, compressed
        self.name = f".parts/{subtask}-{uuid.uuid4()}"
        self.path = Path(directory) / self.name
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._f = open(self.path, "xb")  # noqa: SIM115 (closed by finish/abort)
        self.key_groups: list[int] = []
        self.offsets: list[int] = []
        self.pos = 0

    def add_key_group(self, key_group: int, runs: list[StateRun]) -> None:
        if any(run.keys for run in runs):
            data = encode_key_group(runs, self.compressed)
            self.key_groups.append(key_group)
            self.offsets.append(self.pos)
            self._f.write(data)
            self.pos += len(data)

    def finish(self, entries: int) -> PartInfo:
        self._f.flush()
        os.fsync(self._f.fileno())
        self._f.close()
        return PartInfo(self.subtask, self.name, self.key_groups, self.offsets, self.pos, entries)

    def abort(self) -> None:
        self._f.close()
        self.path.unlink(missing_ok=True)


@dataclass(frozen=True)
class StreamPart:
    """A written subtask stream: its keyed handle in ``_metadata``'s encoding and its entries."""

    subtask: int
    handle: bytes
    entries: int


class SubtaskStreams:
    """Writes the keyed-state streams of one operator from sorted rows (:data:`SORT_KEYS`) into
    ``directory``: one stream per subtask met, each covering the subtask's whole key-group range.
    Plain data only (header bytes, numbers, a path), so a Spark task can hold it."""

    def __init__(self, directory: str, header: bytes, max_parallelism: int, parallelism: int, *,
                 inline_threshold: int = DEFAULT_INLINE_THRESHOLD, where: str = "new savepoint") -> None:
        self.directory, self.header_bytes = directory, header
        self.max_parallelism, self.parallelism = max_parallelism, parallelism
        self.inline_threshold, self.where = inline_threshold, where

    def _open(self) -> tuple[KeyedHeader, list[StateLayout]]:
        header = parse_keyed_header(self.header_bytes, len(self.header_bytes), self.where)
        layouts = [StateLayout(m, header.key_serializer, self.max_parallelism, f"{self.where} state {m.name!r}")
                   for m in header.states]
        return header, layouts

    def write(self, batches: Iterable[pa.RecordBatch]) -> Iterator[StreamPart]:
        """Consume sorted batches; yield each subtask's stream once it is complete."""
        header, layouts = self._open()
        return self._walk(batches, layouts, lambda sub: self._writer(header, sub), self._close)

    def write_parts(self, batches: Iterable[pa.RecordBatch]) -> Iterator[PartInfo]:
        """Consume sorted batches holding any key-group range; write each subtask's key groups
        met into a part file (encoded key groups back to back, no header) and yield where they
        are. :meth:`assemble` turns a subtask's parts into its stream: a subtask's key groups can
        then be written by many tasks."""
        header, layouts = self._open()
        return self._walk(batches, layouts, lambda sub: _PartFile(self.directory, sub, header.compressed),
                          lambda part, sub, entries: part.finish(entries))

    def assemble(self, subtask: int, parts: Iterable[PartInfo]) -> StreamPart:
        """One subtask's stream from its parts (in key-group order); the parts are removed."""
        header, _ = self._open()
        writer = self._writer(header, subtask)
        entries = 0
        try:
            for part in sorted(parts, key=lambda x: x.key_groups[0] if x.key_groups else -1):
                if part.subtask != subtask:
                    raise FlinkSavepointError(f"a part of subtask {part.subtask} given to subtask {subtask}")
                path = Path(self.directory) / part.name
                data = path.read_bytes()
                if len(data) != part.size:
                    raise FlinkSavepointError(f"{path}: {len(data)} bytes, {part.size} written")
                ends = [*part.offsets[1:], part.size]
                for kg, begin, end in zip(part.key_groups, part.offsets, ends, strict=True):
                    writer.add_encoded_key_group(kg, data[begin:end])
                entries += part.entries
                path.unlink()
            return self._close(writer, subtask, entries)
        except BaseException:
            writer.abort()
            raise

    def _walk(self, batches: Iterable[pa.RecordBatch], layouts: list[StateLayout], open_sink: Callable[[int], Any],
              close_sink: Callable[[Any, int, int], Any]) -> Iterator[Any]:
        """Cut sorted rows into subtasks and key groups, hand each key group's runs to the
        subtask's sink, close each sink when its subtask's rows end."""
        current = -1
        sink: Any = None
        assembler = _KeyGroupAssembler(layouts)
        entries = 0

        def close() -> Any:
            nonlocal entries
            for kg, runs in assembler.finish():
                entries += sum(len(r.keys) for r in runs)
                sink.add_key_group(kg, runs)
            return close_sink(sink, current, entries)

        try:
            for batch in batches:
                if not batch.num_rows:
                    continue
                subs = batch.column("subtask").to_numpy(zero_copy_only=False)
                cuts = np.flatnonzero(np.diff(subs)) + 1
                for a, b in zip([0, *cuts.tolist()], [*cuts.tolist(), len(subs)], strict=True):
                    sub = int(subs[a])
                    if sub != current:
                        if sub < current:
                            raise FlinkSavepointError(f"subtask {sub} after {current}: rows are not sorted")
                        if sink is not None:
                            done, sink = close(), None
                            yield done
                        if not 0 <= sub < self.parallelism:
                            raise FlinkSavepointError(f"subtask {sub} is outside 0..{self.parallelism - 1}")
                        current, entries = sub, 0
                        sink = open_sink(sub)
                        assembler = _KeyGroupAssembler(layouts)
                    for kg, runs in assembler.feed(batch.slice(a, b - a)):
                        entries += sum(len(r.keys) for r in runs)
                        sink.add_key_group(kg, runs)
            if sink is not None:
                done, sink = close(), None
                yield done
        finally:
            if sink is not None:
                sink.abort()

    def empty(self, subtask: int) -> StreamPart:
        """The stream of a subtask with no entries (its header only)."""
        header, _ = self._open()
        return self._close(self._writer(header, subtask), subtask, 0)

    def _writer(self, header: KeyedHeader, subtask: int) -> KeyedStreamWriter:
        if not 0 <= subtask < self.parallelism:
            raise FlinkSavepointError(f"subtask {subtask} is outside 0..{self.parallelism - 1}")
        r = key_group_range_for_operator(self.max_parallelism, self.parallelism, subtask)
        return KeyedStreamWriter(Path(self.directory), str(uuid.uuid4()), header, r.start, len(r))

    def _close(self, writer: KeyedStreamWriter, subtask: int, entries: int) -> StreamPart:
        """Finish a complete stream (inline in ``_metadata`` when small, as Flink does)."""
        handle = writer.finish(writer.pos < self.inline_threshold)
        out = DataOutputSerializer()
        write_keyed_handle(out, handle)
        return StreamPart(subtask, out.get_copy_of_buffer(), entries)


def parse_stream_part(part: StreamPart, where: str) -> KeyGroupsHandle:
    src = DataInputDeserializer(part.handle)
    handle = read_keyed_handle(src, where)
    if not isinstance(handle, KeyGroupsHandle) or src.available():
        raise FlinkSavepointError(f"{where}: a written stream handed back a handle that is not one key-groups handle")
    return handle


def keyed_operator(uid: str, parallelism: int, max_parallelism: int, handles: Mapping[int, KeyGroupsHandle],
                   name: str | None = None) -> OperatorState:
    """A keyed operator's entry in ``_metadata``: identified by its uid (OperatorID derived as
    Flink does), one subtask state per subtask holding its managed keyed-state handle."""
    subtasks = [SubtaskState(index=i, managed_keyed=handles.get(i)) for i in range(parallelism)]
    return OperatorState(operator_id(uid), parallelism, max_parallelism, None, subtasks, name or uid, uid)


def new_metadata(operators: list[OperatorState]) -> CheckpointMetadata:
    """The ``_metadata`` of a new canonical savepoint holding ``operators``."""
    return CheckpointMetadata(NEW_METADATA_VERSION, BOOTSTRAP_CHECKPOINT_ID, [], operators, checkpoint_properties())


__all__ = ["BOOTSTRAP_CHECKPOINT_ID", "DEFAULT_INLINE_THRESHOLD", "NEW_METADATA_VERSION", "ROWS_SCHEMA",
           "SORT_KEYS", "TIMER_QUEUE_PREFIXES", "PartInfo", "StreamPart", "SubtaskStreams", "columnar_entries",
           "envelope", "keyed_operator", "new_keyed_header", "new_metadata", "new_state_meta", "new_timer_meta",
           "parse_stream_part", "state_value_snapshot", "subtask_of", "wrapper_snapshot"]
