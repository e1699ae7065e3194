"""Bootstrap: a new Flink canonical savepoint from tables of keys and values (the writer half of
a Python State Processor API), on one machine or on Spark.

Why here: the rows of every state are encoded with the bulk kernels by the engine's
:class:`~.batches.StateEncoder` (keys, user keys and values with their serializers; key groups
computed exactly as Flink assigns them), tagged with their subtask and state id, sorted by subtask
and key group, and handed to :class:`~statemorph.savepoint.flink.assemble.SubtaskStreams`, which
writes each subtask's keyed-state stream; the driver then writes ``_metadata`` and the directory
appears atomically. On Spark the encoding, the shuffle into key-group ranges, the sort, the part
files and the assembly of each stream from its parts run on the executors (the destination must
be on a filesystem they share with the driver), and only offsets and each stream's handle (bytes)
come back. :mod:`.rescale` reuses the same back half.
"""

from __future__ import annotations

import copy
import os
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from ..bulk.chunks import DEFAULT_THREADS
from ..errors import FlinkSavepointError, UsageError
from ..keyed.keygroups import check_max_parallelism
from ..keyed.namespace import VoidNamespaceSerializer
from ..savepoint.files import StagedDirectory, output_error
from ..savepoint.flink import FlinkSavepoint
from ..savepoint.flink.assemble import (
    DEFAULT_INLINE_THRESHOLD,
    ROWS_SCHEMA,
    SORT_KEYS,
    PartInfo,
    StreamPart,
    SubtaskStreams,
    keyed_operator,
    new_keyed_header,
    new_metadata,
    new_state_meta,
    new_timer_meta,
    parse_stream_part,
    state_value_snapshot,
    subtask_of,
)
from ..savepoint.flink.keyed_header import write_keyed_header
from ..savepoint.flink.metadata import METADATA_FILE_NAME, CheckpointMetadata, serialize_metadata
from ..savepoint.flink.operator_ids import operator_id
from ..savepoint.flink.rewrite import carry_files
from ..serializers import LongSerializer
from ..types import RowType
from ..typeutils import flink_snapshot, write_versioned_snapshot
from .batches import ENCODED_KINDS, TIMERS, StateEncoder


@dataclass
class StateData:
    """One keyed state to bootstrap: ``data`` (a pyarrow Table / RecordBatch / iterable of
    batches, or a Spark DataFrame) with a key column, a value column (or several making up a row
    value), a user-key column for map state and an ``index`` column (0, 1, ... per key) for list
    state; ``kind`` is value, list, map, reducing or aggregating (the last two are what window
    operators keep their window contents and trigger state in). ``ttl`` writes the state as Flink
    writes a state whose descriptor enables TTL: every value (list element, map value) carries its
    last-access time, taken from the ``ttl_timestamp`` column (epoch milliseconds) or, without
    one, the time of the bootstrap.

    ``namespace_serializer`` puts the state in a namespace other than VoidNamespace, such as a
    window operator's windows (``TimeWindowSerializer``: the ``window_start`` / ``window_end``
    columns; ``GlobalWindowSerializer``: no column); other fixed-length namespaces come from the
    ``namespace`` column.

    ``kind="timers"`` writes a timer queue (``value_serializer`` None): one timer per row, at the
    ``timestamp`` column's time (epoch milliseconds), for the row's key and namespace. Its name
    is the one Flink gives it, ``_timer_state/event_<service>`` or
    ``_timer_state/processing_<service>`` (a window operator's service is ``window-timers``, a
    process function's ``user-timers``); a window operator fires a window whose end-of-window
    timer (at ``window_end - 1``, in the window's namespace) is restored, with or without new
    records for its key."""

    data: Any
    value_serializer: Any
    kind: str = "value"
    user_key_serializer: Any = None
    key: str = "key"
    value: str | list[str] = "value"
    user_key: str = "user_key"
    index: str = "index"
    ttl: bool = False
    ttl_timestamp: str = "ttl_timestamp"
    namespace_serializer: Any = None
    namespace: str = "namespace"
    timestamp: str = "timestamp"


@dataclass
class BootstrapReport:
    """What a bootstrap (or a rescale) wrote."""

    path: str
    operator: str
    max_parallelism: int
    parallelism: int
    entries: int
    streams: int
    engine: str = "local"
    seconds: float = 0.0
    per_subtask: dict[int, int] = field(default_factory=dict)

    @classmethod
    def of(cls, dst: str | os.PathLike[str], operator: str, max_parallelism: int, parallelism: int,
           counts: dict[int, int], spark: Any, t0: float) -> BootstrapReport:
        """The report of a run that started at ``t0`` and wrote ``counts`` entries per subtask."""
        return cls(os.fspath(dst), operator, max_parallelism, parallelism, sum(counts.values()), parallelism,
                   "local" if spark is None else "spark", time.perf_counter() - t0, counts)

    def summary(self) -> str:
        return (f"{self.path}: operator {self.operator!r}, max parallelism {self.max_parallelism}, parallelism "
                f"{self.parallelism}: {self.entries:,} entries in {self.streams} keyed-state streams "
                f"({self.engine}, {self.seconds:.1f}s)")


class RowTagger:
    """Encoded state rows (the reader's columns) → :data:`ROWS_SCHEMA` rows: adds the state id
    and the owning subtask, fills the columns the kind does not have with nulls."""

    def __init__(self, state_id: int, max_parallelism: int, parallelism: int) -> None:
        self.state_id, self.max_parallelism, self.parallelism = state_id, max_parallelism, parallelism

    def __call__(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        n = batch.num_rows
        kgs = batch.column("key_group").to_numpy(zero_copy_only=False)
        cols = {
            "subtask": pa.array(subtask_of(kgs, self.max_parallelism, self.parallelism), pa.int32()),
            "state": pa.array(np.full(n, self.state_id, dtype=np.int32), pa.int32()),
        }
        arrays = []
        for f in ROWS_SCHEMA:
            if f.name in cols:
                arrays.append(cols[f.name])
            elif f.name in batch.schema.names:
                arrays.append(batch.column(f.name).cast(f.type))
            else:
                arrays.append(pa.nulls(n, f.type))
        return pa.RecordBatch.from_arrays(arrays, schema=ROWS_SCHEMA)


def check_row_fields(arrow_type: pa.DataType, row_type: Any, where: str) -> None:
    """A struct column written as RowData must name the row type's fields (nested rows too): the
    bulk encoder matches fields by name, so a misspelt field would otherwise become null."""
    if not pa.types.is_struct(arrow_type) or not isinstance(row_type, RowType):
        return
    have = [arrow_type.field(i).name for i in range(arrow_type.num_fields)]
    want = [f.name for f in row_type.fields]
    if sorted(have) != sorted(want):
        raise UsageError(f"{where}: the struct's fields {have} are not the row type's fields {want}")
    for f in row_type.fields:
        check_row_fields(arrow_type.field(f.name).type, f.type, f"{where}.{f.name}")


class _EncodeAndTag:
    """Typed rows → tagged binary rows (picklable: what a Spark task runs per state). With
    ``ttl_column`` the rows carry a TTL timestamp: that column's, or ``ttl_default``."""

    def __init__(self, encoder: StateEncoder, tagger: RowTagger, ttl_column: str | None = None,
                 ttl_default: int = 0) -> None:
        self.encoder, self.tagger = encoder, tagger
        self.ttl_column, self.ttl_default = ttl_column, ttl_default

    def __call__(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        enc = self.encoder
        key_ser = enc._ser("key", enc.key_ser)
        check_row_fields(batch.schema.field(enc.key_col).type, getattr(key_ser, "row_type", None), "key column")
        if enc.value_ser is not None and isinstance(enc.value_cols, str):
            value_ser = enc._ser("value", enc.value_ser)
            check_row_fields(batch.schema.field(enc.value_cols).type, getattr(value_ser, "row_type", None),
                             f"value column {enc.value_cols!r}")
        out = enc(batch)
        if self.ttl_column is not None:
            if self.ttl_column in batch.schema.names:
                ts = batch.column(self.ttl_column).cast(pa.int64())
                if ts.null_count:
                    raise UsageError(f"column {self.ttl_column!r} has null TTL timestamps")
            else:
                ts = pa.array(np.full(batch.num_rows, self.ttl_default, dtype=np.int64), pa.int64())
            out = out.append_column("ttl_timestamp", ts)
        return self.tagger(out)

    def map_batches(self, batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for b in batches:
            yield self(b)


class _WriteParts:
    """What a Spark task runs after the shuffle: write its key-group range as part files of the
    subtasks it holds, return where they are."""

    def __init__(self, streams: SubtaskStreams) -> None:
        self.streams = streams

    def __call__(self, batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for part in self.streams.write_parts(batches):
            yield pa.RecordBatch.from_pylist([part.__dict__], schema=PART_SCHEMA)


class _Assemble:
    """What a Spark task runs last: one subtask's stream from its parts."""

    def __init__(self, streams: SubtaskStreams) -> None:
        self.streams = streams

    def __call__(self, item: tuple[int, list[PartInfo]]) -> StreamPart:
        return self.streams.assemble(*item)


PART_SCHEMA = pa.schema([pa.field("subtask", pa.int32()), pa.field("name", pa.string()),
                         pa.field("key_groups", pa.list_(pa.int32())), pa.field("offsets", pa.list_(pa.int64())),
                         pa.field("size", pa.int64()), pa.field("entries", pa.int64())])


def _batches(data: Any) -> Iterator[pa.RecordBatch]:
    if isinstance(data, pa.Table):
        yield from data.to_batches()
    elif isinstance(data, pa.RecordBatch):
        yield data
    else:
        yield from data


def _is_spark_df(data: Any) -> bool:
    return hasattr(data, "mapInArrow") and hasattr(data, "sparkSession")


def write_parts_local(streams: SubtaskStreams, tagged: Iterable[pa.RecordBatch]) -> list[StreamPart]:
    """Sort every tagged row in memory (a local run's data fits one machine) and write the streams."""
    table = pa.Table.from_batches(list(tagged), schema=ROWS_SCHEMA)
    table = table.sort_by([(k, "ascending") for k in SORT_KEYS])
    return list(streams.write(table.to_batches(max_chunksize=1 << 16)))


def write_parts_spark(spark: Any, streams: SubtaskStreams, tagged: Any, tasks: int | None = None) -> list[StreamPart]:
    """Shuffle the tagged rows (a DataFrame) into ``tasks`` key-group ranges (default twice the
    default parallelism; rows of one key group stay together), sort within each range, write each
    range's key groups as part files of their subtasks, then assemble every subtask's stream from
    its parts, one task per stream. A subtask's key groups are thus written by many tasks; no
    entry passes through the driver, which gets the parts' offsets and the streams' handles."""
    # pyspark is the optional spark extra: imported only where Spark runs
    from pyspark.sql.pandas.types import from_arrow_schema

    n = tasks if tasks is not None else max(1, 2 * int(spark.sparkContext.defaultParallelism))
    rows = (tagged.repartitionByRange(n, "key_group").sortWithinPartitions(*SORT_KEYS)
            .mapInArrow(_WriteParts(streams), from_arrow_schema(PART_SCHEMA)).collect())
    by_subtask: dict[int, list[PartInfo]] = {}
    for r in rows:
        part = PartInfo(r["subtask"], r["name"], list(r["key_groups"]), list(r["offsets"]), r["size"], r["entries"])
        by_subtask.setdefault(part.subtask, []).append(part)
    work = sorted(by_subtask.items())
    if not work:
        return []
    out: list[StreamPart] = spark.sparkContext.parallelize(work, len(work)).map(_Assemble(streams)).collect()
    parts_dir = os.path.join(streams.directory, ".parts")
    if os.path.isdir(parts_dir):
        os.rmdir(parts_dir)
    return out


def commit_operator(staged_dir: str, streams: SubtaskStreams, parts: list[StreamPart], meta: CheckpointMetadata,
                    op_index: int) -> dict[int, int]:
    """Put the written streams (and header-only streams for subtasks without entries) into
    operator ``op_index`` of ``meta``; returns entries per subtask."""
    op = meta.operators[op_index]
    counts: dict[int, int] = {}
    by_subtask = {}
    for part in parts:
        if part.subtask in by_subtask:
            raise FlinkSavepointError(f"subtask {part.subtask}'s stream was written twice")
        by_subtask[part.subtask] = parse_stream_part(part, f"{op.label()} subtask {part.subtask}")
        counts[part.subtask] = part.entries
    for st in op.subtasks or []:
        if st.index not in by_subtask:
            by_subtask[st.index] = parse_stream_part(streams.empty(st.index), f"{op.label()} subtask {st.index}")
            counts[st.index] = 0
        st.managed_keyed = by_subtask[st.index]
    return counts


def carry_over(source: FlinkSavepoint, meta: CheckpointMetadata, dropped: set[str], directory: Any) -> None:
    """Carry every file of ``source`` that ``meta`` still needs (and any other top-level file but
    ``dropped``) into ``directory``, hard-linked where possible, and make absolute handles
    relative: the rewriter's own carry-over (:mod:`statemorph.savepoint.flink.rewrite`)."""
    carry_files(source.directory, meta, dropped, Path(directory))
    source.directory.relativize(meta)


def finish_savepoint(directory: str | os.PathLike[str], streams: SubtaskStreams, parts: list[StreamPart],
                     meta: CheckpointMetadata, op_index: int, source: FlinkSavepoint | None,
                     dropped: set[str]) -> dict[int, int]:
    """The end of every State-Processor write (bootstrap, rescale): the written streams into
    operator ``op_index``, the files ``meta`` still needs carried from ``source`` (if any), then
    ``_metadata`` last. Returns entries per subtask."""
    counts = commit_operator(os.fspath(directory), streams, parts, meta, op_index)
    if source is not None:
        carry_over(source, meta, dropped, directory)
    write_metadata(directory, meta)
    return counts


def write_metadata(directory: str | os.PathLike[str], meta: CheckpointMetadata) -> None:
    with open(os.path.join(directory, METADATA_FILE_NAME), "xb") as f:
        f.write(serialize_metadata(meta))
        f.flush()
        os.fsync(f.fileno())


def _header_bytes(key_serializer: Any, states: Mapping[str, StateData], compression: bool) -> bytes:
    ttl = write_versioned_snapshot(LongSerializer().snapshot_configuration())
    key = write_versioned_snapshot(flink_snapshot(key_serializer))
    metas = []
    for name, sd in states.items():
        if sd.kind not in (*ENCODED_KINDS, TIMERS):
            raise UsageError(f"state {name!r}: kind must be one of {', '.join((*ENCODED_KINDS, TIMERS))}, "
                             f"got {sd.kind!r}")
        ns = sd.namespace_serializer if sd.namespace_serializer is not None else VoidNamespaceSerializer()
        if ns.get_length() < 0:  # composite keys would need Flink's length suffixes
            raise UsageError(f"state {name!r}: a bootstrapped namespace must have a fixed length, "
                             f"{type(ns).__name__}'s does not")
        namespace = write_versioned_snapshot(flink_snapshot(ns))
        if sd.kind == TIMERS:
            if sd.ttl or sd.user_key_serializer is not None or sd.value_serializer is not None:
                raise UsageError(f"timer queue {name!r} has no value, user key or TTL")
            try:
                metas.append(new_timer_meta(name, key, namespace))
            except FlinkSavepointError as e:
                raise UsageError(str(e)) from None
            continue
        if sd.value_serializer is None:
            raise UsageError(f"state {name!r}: a {sd.kind} state needs its value serializer")
        user_key = (write_versioned_snapshot(flink_snapshot(sd.user_key_serializer))
                    if sd.user_key_serializer is not None else None)
        top = state_value_snapshot(sd.kind, write_versioned_snapshot(flink_snapshot(sd.value_serializer)),
                                   user_key, ttl if sd.ttl else None)
        metas.append(new_state_meta(name, sd.kind, top, namespace))
    return write_keyed_header(new_keyed_header(key, metas, compression))


def write_flink_savepoint(dst: str | os.PathLike[str], *, operator: str, key_serializer: Any,
                          states: Mapping[str, StateData], max_parallelism: int = 128, parallelism: int = 1,
                          compression: bool = False, inline_threshold: int = DEFAULT_INLINE_THRESHOLD,
                          threads: int = DEFAULT_THREADS, spark: Any = None, tasks: int | None = None,
                          base: str | os.PathLike[str] | None = None) -> BootstrapReport:
    """Write the new Flink savepoint ``dst`` holding one keyed operator with uid ``operator``
    and the given ``states`` (name → :class:`StateData`), as Flink would have written it at
    ``max_parallelism`` and ``parallelism``: a job whose operator has that uid, key type and max
    parallelism restores it. ``compression`` Snappy-frames every key group (Flink's
    ``execution.checkpointing.snapshot-compression``). With ``spark`` (or when a state's data is
    a Spark DataFrame) everything runs on Spark, in ``tasks`` key-group ranges
    (:func:`write_parts_spark`); ``dst`` must then be on a filesystem every executor sees at the
    same path. ``dst`` appears complete or not at all.

    With ``base`` (an existing Flink savepoint) the new operator is added to a copy of it: every
    operator and file of ``base`` is carried over unchanged (``base`` itself is only read); an
    operator with the same uid must not exist there."""
    t0 = time.perf_counter()
    check_max_parallelism(max_parallelism)
    if not 0 < parallelism <= max_parallelism:
        raise UsageError(f"parallelism must be in 1..max_parallelism ({max_parallelism}), got {parallelism}")
    if not states:
        raise UsageError("a bootstrapped savepoint needs at least one state")
    if not operator:
        raise UsageError("the operator needs a uid (the restoring job sets the same uid on its operator)")
    spark_data = [n for n, sd in states.items() if _is_spark_df(sd.data)]
    if spark_data and len(spark_data) != len(states):
        raise UsageError("either every state's data is a Spark DataFrame or none is")
    if spark is None and spark_data:
        spark = states[spark_data[0]].data.sparkSession
    header = _header_bytes(key_serializer, states, compression)
    source = FlinkSavepoint(base) if base is not None else None
    if source is not None and any(o.operator_id == operator_id(operator) for o in source.operators):
        raise UsageError(f"{base} already has an operator with uid {operator!r} (or its uid hash); remove it first")
    try:
        with StagedDirectory(dst, source=base) as staged:
            streams = SubtaskStreams(str(staged.temp.resolve()), header, max_parallelism, parallelism,
                                     inline_threshold=inline_threshold, where=f"{dst} operator {operator!r}")
            taggers = []
            now = int(time.time() * 1000)
            for sid, (_, sd) in enumerate(states.items()):
                enc = StateEncoder(key_serializer, sd.value_serializer, max_parallelism=max_parallelism,
                                   kind=sd.kind, key=sd.key, value=sd.value, user_key_serializer=sd.user_key_serializer,
                                   user_key=sd.user_key, index=sd.index, threads=threads,
                                   namespace_serializer=sd.namespace_serializer, namespace=sd.namespace,
                                   timestamp=sd.timestamp)
                taggers.append((sd, _EncodeAndTag(enc, RowTagger(sid, max_parallelism, parallelism),
                                                  sd.ttl_timestamp if sd.ttl else None, now)))
            if spark is None:
                parts = write_parts_local(streams, (fn(b) for sd, fn in taggers for b in _batches(sd.data)))
            else:
                parts = write_parts_spark(spark, streams, _spark_tagged(spark, taggers), tasks)
            new_op = keyed_operator(operator, parallelism, max_parallelism, {})
            if source is None:
                meta = new_metadata([new_op])
            else:
                meta = copy.deepcopy(source.metadata)
                meta.operators.append(new_op)
            counts = finish_savepoint(staged.temp, streams, parts, meta, len(meta.operators) - 1, source, set())
    except OSError as e:
        raise output_error(e, dst, "write the Flink savepoint") from e
    return BootstrapReport.of(dst, operator, max_parallelism, parallelism, counts, spark, t0)


def _as_df(spark: Any, data: Any) -> Any:
    if _is_spark_df(data):
        return data
    return spark.createDataFrame(pa.Table.from_batches(list(_batches(data))))


def _spark_tagged(spark: Any, taggers: list[tuple[StateData, _EncodeAndTag]]) -> Any:
    # pyspark is the optional spark extra: imported only where Spark runs
    from pyspark.sql.pandas.types import from_arrow_schema

    schema = from_arrow_schema(ROWS_SCHEMA)
    frames = [_as_df(spark, sd.data).mapInArrow(fn.map_batches, schema) for sd, fn in taggers]
    out = frames[0]
    for f in frames[1:]:
        out = out.unionByName(f)
    return out


__all__ = ["BootstrapReport", "RowTagger", "StateData", "carry_over", "check_row_fields", "commit_operator",
           "write_flink_savepoint", "write_metadata", "write_parts_local", "write_parts_spark"]
