"""Reading a canonical Flink savepoint: operators, per-subtask keyed-state streams, and each
state's entries as Arrow record batches in the column shape of statemorph's Parquet form.

Streams are read one key group at a time, and a large key group one slice of about a MiB at a
time (:func:`.key_group_scan.scanned_groups`, the migration's own cut), so memory follows
neither the savepoint nor its largest key group, nor what a hostile ``_metadata`` claims one
holds. Batches hold binary columns (``key_group``, ``key``, ``namespace``, [``user_key`` |
``index``], ``value``); a state with TTL adds ``ttl_timestamp`` (int64, the last-access time
Flink keeps before each value), and timers have ``key_group``, ``timestamp``, ``key``,
``namespace``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass

import pyarrow as pa

from ...errors import FlinkSavepointError
from ...keyed.entries import state_schema
from ...typeutils import SnapshotRegistry
from ..files import Closing
from ..storage import Location
from .files import SavepointDirectory, StreamSource
from .handles import KeyGroupsHandle
from .key_group_scan import ScannedGroup, scanned_groups
from .keyed_blocks import StateRun, iter_key_groups, key_group_extents
from .keyed_header import KeyedHeader, StateMetaInfo, parse_keyed_header
from .layout import COL_KEY_BYTES, COL_VALUE_BYTES, StateLayout
from .metadata import METADATA_FILE_NAME, CheckpointMetadata, OperatorState, SubtaskState, parse_metadata
from .operator_ids import find_operator

MAX_HEADER_BYTES = 64 << 20
DEFAULT_BATCH_ROWS = 1 << 16
COL_TTL = "ttl_timestamp"
COL_TIMESTAMP = "timestamp"
PARQUET_KIND = {"value": "value", "reducing": "value", "aggregating": "value", "list": "list", "map": "map"}


def flink_state_schema(kind: str, ttl: bool = False, whole: bool = False, whole_keys: bool = False) -> pa.Schema:
    """The Arrow schema of a state's batches: the Parquet form's ``state_schema`` for the kind
    (reducing and aggregating state store one value per key, like value state), plus
    ``ttl_timestamp`` when the state has TTL; timers have their own four columns. A ``whole``
    state (:func:`.layout.whole_values`) has key group, key, namespace and ``value_bytes``, the
    Flink value as it is (TTL stamps inside); a ``whole_keys`` state (:func:`.layout.whole_keys`)
    has key group, ``key_bytes`` (the composite key after its key-group prefix) and ``value_bytes``."""
    if whole_keys:
        return pa.schema([
            pa.field("key_group", pa.int32(), nullable=False),
            pa.field(COL_KEY_BYTES, pa.binary(), nullable=False),
            pa.field(COL_VALUE_BYTES, pa.binary(), nullable=False),
        ])
    if whole:
        return pa.schema([
            pa.field("key_group", pa.int32(), nullable=False),
            pa.field("key", pa.binary(), nullable=False),
            pa.field("namespace", pa.binary(), nullable=False),
            pa.field(COL_VALUE_BYTES, pa.binary(), nullable=False),
        ])
    if kind == "timers":
        return pa.schema([
            pa.field("key_group", pa.int32(), nullable=False),
            pa.field(COL_TIMESTAMP, pa.int64(), nullable=False),
            pa.field("key", pa.binary(), nullable=False),
            pa.field("namespace", pa.binary(), nullable=False),
        ])
    if kind not in PARQUET_KIND:
        raise FlinkSavepointError(f"state kind {kind!r} has no column layout (value, list, map, reducing, aggregating)")
    schema = state_schema(PARQUET_KIND[kind])
    if ttl:
        schema = schema.append(pa.field(COL_TTL, pa.int64(), nullable=kind == "map"))
    return schema


class KeyedStream(Closing):
    """One subtask's keyed-state stream: its header and its key groups."""

    def __init__(self, source: StreamSource, handle: KeyGroupsHandle, where: str,
                 registry: SnapshotRegistry | None = None) -> None:
        self.source = source
        self.handle = handle
        self.where = where
        header_end, self.extents = key_group_extents(handle, source.size, where)
        if header_end > MAX_HEADER_BYTES:
            raise FlinkSavepointError(f"{where}: keyed-state header of {header_end} bytes exceeds {MAX_HEADER_BYTES}")
        self.header_end = header_end
        self.header: KeyedHeader = parse_keyed_header(
            source.read_at(0, header_end, "keyed-state header"), header_end, where, registry
        )

    def key_groups(self, only: range | None = None) -> Iterator[tuple[int, list[StateRun]]]:
        """Every non-empty key group as ``(key group, state runs)``, each whole (the per-entry
        migration of kinds the bulk path does not take needs whole groups); ``only`` restricts
        the walk to a key-group range, without reading the other groups. Readers use
        :meth:`scanned`, which holds a slice, not a key group."""
        return iter_key_groups(self.source, self.handle, self.header.compressed, len(self.header.states),
                               self.where, only)

    def scanned(self, only: range | None = None, states: set[int] | None = None) -> Iterator[ScannedGroup]:
        """Every non-empty key group (of the range ``only``) scanned by the block kernel, a large
        one as consecutive slices: what the readers walk, so they hold one slice at a time.
        ``states`` says which state ids the caller reads: a hint a stream may use to skip the
        others (a RocksDB instance's column families); a file's bytes are read either way."""
        extents = [e for e in self.extents if only is None or e.key_group in only]
        return scanned_groups(self.source, extents, self.header.compressed, len(self.header.states), self.where)

    def state_runs(self, only: range | None, state_id: int) -> Iterator[StateRun]:
        """The entries of state ``state_id`` (of the range ``only``) as runs of ``bytes`` keys and
        values, a slice at a time: what the table reader builds its columns from."""
        for group in self.scanned(only, {state_id}):
            yield from group.runs(state_id)

    def close(self) -> None:
        self.source.close()


@dataclass
class StateInfo:
    name: str
    kind: str
    key_serializer: str
    namespace_serializer: str | None
    value_serializer: str | None
    user_key_serializer: str | None
    ttl: bool
    entries: int = 0
    bytes: int = 0

    def to_json(self) -> dict[str, object]:
        return dict(self.__dict__)


@dataclass
class OperatorInfo:
    name: str | None
    uid: str | None
    uid_hash: str
    parallelism: int
    max_parallelism: int
    states: list[StateInfo]

    def to_json(self) -> dict[str, object]:
        d = {k: v for k, v in self.__dict__.items() if k != "states"}
        d["states"] = [s.to_json() for s in self.states]
        return d


@dataclass
class SavepointInfo:
    path: str
    metadata_version: int
    checkpoint_id: int
    operators: list[OperatorInfo]

    def to_json(self) -> dict[str, object]:
        return {"format": "flink", "metadata_version": self.metadata_version, "checkpoint_id": self.checkpoint_id,
                "operators": [o.to_json() for o in self.operators]}


class FlinkSavepoint:
    """A canonical Flink savepoint directory, opened read-only: a local path, or a URI /
    :class:`~statemorph.savepoint.storage.Location` read in place (only ``_metadata`` whole;
    state files by the byte ranges a caller reads)."""

    def __init__(self, path: str | os.PathLike[str] | Location, registry: SnapshotRegistry | None = None) -> None:
        self.directory = SavepointDirectory(path)
        self.path = self.directory.path
        self.registry = registry
        self.metadata: CheckpointMetadata = parse_metadata(
            self.directory.read_metadata(), f"{self.path}/{METADATA_FILE_NAME}"
        )
        self.directory.check_distinct(self.metadata)

    @property
    def version(self) -> int:
        return self.metadata.version

    @property
    def operators(self) -> list[OperatorState]:
        return self.metadata.operators

    def operator(self, ident: str) -> OperatorState:
        """The operator ``ident`` names: a uid, a uid hash (32 hex digits), or a uid this
        savepoint does not record (Flink 1.x) by its derived ID (:func:`.operator_ids.find_operator`)."""
        op = find_operator(self.operators, ident, lambda o: o)
        if op is not None:
            return op
        known = ", ".join(op.uid or op.uid_hash for op in self.operators)
        raise FlinkSavepointError(f"{self.path}: no operator with uid or uid hash {ident!r} (operators: {known})")

    def keyed_streams(self, op: OperatorState) -> Iterator[tuple[SubtaskState, KeyedStream]]:
        """Each subtask's managed keyed-state stream, opened one after the other."""
        for st in op.subtasks or []:
            if st.managed_keyed is None:
                continue
            where = f"{self.path}: {op.label()} subtask {st.index}"
            source = self.directory.open_stream(st.managed_keyed.delegate, where)
            try:
                stream = KeyedStream(source, st.managed_keyed, where, self.registry)
            except BaseException:
                source.close()
                raise
            with stream:
                yield st, stream

    def inspect(self, count_entries: bool = True) -> SavepointInfo:
        """Operators and their keyed states; with ``count_entries`` every key group is read to
        count entries and bytes (uncompressed key + value bytes)."""
        ops = []
        for op in self.operators:
            states: dict[str, StateInfo] = {}
            for _, stream in self.keyed_streams(op):
                h = stream.header
                infos = [states.setdefault(m.name, _state_info(m, h)) for m in h.states]
                if count_entries:
                    for group in stream.scanned():
                        for sid, entries, size in group.run_totals():
                            infos[sid].entries += entries
                            infos[sid].bytes += size
            ops.append(OperatorInfo(op.name, op.uid, op.uid_hash, op.parallelism, op.max_parallelism,
                                    list(states.values())))
        return SavepointInfo(str(self.path), self.version, self.metadata.checkpoint_id, ops)

    def iter_state_batches(self, operator: str, state: str, batch_rows: int = DEFAULT_BATCH_ROWS,
                           key_groups: range | None = None) -> Iterator[pa.RecordBatch]:
        """One state's entries as record batches of at most ``batch_rows`` rows (list state: one
        row per element), subtask by subtask, key group by key group; ``key_groups`` restricts the
        read to a key-group range (e.g. one Spark task's share)."""
        op = self.operator(operator)
        found = False
        for _, stream in self.keyed_streams(op):
            try:
                state_id, meta = stream.header.state(state)
            except FlinkSavepointError:
                continue
            found = True
            if key_groups is not None and not _overlaps(stream.handle.key_groups, key_groups):
                continue
            layout = StateLayout(meta, stream.header.key_serializer, op.max_parallelism,
                                 f"{stream.where} state {state!r}")
            builder = _BatchBuilder(layout)
            for run in stream.state_runs(key_groups, state_id):
                builder.add(run)
                while builder.rows >= batch_rows:
                    yield builder.take(batch_rows)
            if builder.rows:
                yield builder.take(builder.rows)
        if not found:
            raise FlinkSavepointError(f"{self.path}: {op.label()} has no keyed state named {state!r}")


def _overlaps(a: range, b: range) -> bool:
    return max(a.start, b.start) < min(a.stop, b.stop)


def _state_info(m: StateMetaInfo, h: KeyedHeader) -> StateInfo:
    value, ttl = m.value_snapshot_unwrapped()
    ns = m.namespace_snapshot()
    uk = m.user_key_snapshot()
    return StateInfo(m.name, m.kind, h.key_serializer.class_name, ns.class_name if ns else None,
                     value.class_name if value else None, uk.class_name if uk else None, ttl)


class _BatchBuilder:
    """Collects split rows of one state and cuts them into record batches."""

    def __init__(self, layout: StateLayout) -> None:
        self.layout = layout
        self.schema = flink_state_schema(layout.kind, layout.ttl, layout.whole, layout.whole_keys)
        self.cols: dict[str, list[object]] = {f.name: [] for f in self.schema}

    @property
    def rows(self) -> int:
        return len(self.cols["key_group"])

    def add(self, run: StateRun) -> None:
        for name, col in self.layout.columns(run.keys, run.values).items():
            self.cols[name].extend(col)

    def take(self, n: int) -> pa.RecordBatch:
        arrays = [pa.array(self.cols[f.name][:n], f.type) for f in self.schema]
        for name in self.cols:
            del self.cols[name][:n]
        return pa.RecordBatch.from_arrays(arrays, schema=self.schema)
