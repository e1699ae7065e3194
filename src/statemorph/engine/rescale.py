"""Changing the max parallelism of a keyed operator in a Flink savepoint (and its parallelism).

Why statemorph does it: Flink refuses to restore keyed state under another max parallelism
(the key groups would not match), and the State Processor API does it only by re-bootstrapping
through the user's Java classes. Every key's group is ``murmur(key.hashCode()) % maxParallelism``,
so re-assigning needs the key's Java ``hashCode``: statemorph computes it for the key types whose
hash it reproduces (:func:`~statemorph.keyed.keygroups.has_java_hash`) and refuses the others
before writing anything. Values, namespaces, user keys, TTL timestamps and timers are carried
as their bytes: only the key-group prefix of each composite key changes (and its width, 1 or 2
bytes, when the new max parallelism crosses 128). The streams are written by the bootstrap's back
half (:mod:`.bootstrap`); every other operator and file is carried over unchanged.
"""

from __future__ import annotations

import copy
import os
import time
from collections.abc import Iterable, Iterator
from typing import Any

import pyarrow as pa

from .. import arrow
from ..errors import FlinkSavepointError, UnsupportedStateError, UsageError
from ..keyed.keygroups import check_max_parallelism, has_java_hash
from ..savepoint.files import StagedDirectory, output_error
from ..savepoint.flink import FlinkSavepoint
from ..savepoint.flink.assemble import DEFAULT_INLINE_THRESHOLD, ROWS_SCHEMA, SubtaskStreams
from ..savepoint.flink.handles import FileHandle, RelativeFileHandle
from ..savepoint.flink.metadata import OperatorState, SubtaskState
from ..savepoint.flink.splits import key_group_splits
from ..typeutils import read_versioned_snapshot
from .bootstrap import (
    BootstrapReport,
    RowTagger,
    finish_savepoint,
    write_parts_local,
    write_parts_spark,
)
from .keys import key_groups


class _Rekey:
    """Reads an operator's entries (every state and timer queue) of a key-group range of the
    source and tags them with their key group and subtask at the new max parallelism. Plain
    data only: a Spark task holds one."""

    def __init__(self, src: str, operator: str, states: list[str], key_snapshot: bytes, max_parallelism: int,
                 parallelism: int, ranges: list[tuple[int, int]] | None = None) -> None:
        self.src, self.operator, self.states, self.key_snapshot = src, operator, states, key_snapshot
        self.max_parallelism, self.parallelism, self.ranges = max_parallelism, parallelism, ranges

    def rows(self, only: range | None = None) -> Iterator[pa.RecordBatch]:
        sp = FlinkSavepoint(self.src)
        key_serializer = read_versioned_snapshot(self.key_snapshot).restore_serializer()
        for sid, name in enumerate(self.states):
            tag = RowTagger(sid, self.max_parallelism, self.parallelism)
            for b in sp.iter_state_batches(self.operator, name, key_groups=only):
                if not b.num_rows:
                    continue
                groups = key_groups(arrow.decode(b.column("key"), key_serializer), key_serializer,
                                    self.max_parallelism)
                yield tag(b.set_column(b.schema.get_field_index("key_group"), "key_group", groups))

    def __call__(self, batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        assert self.ranges is not None
        for b in batches:
            for task in b.column(0).to_pylist():
                start, stop = self.ranges[task]
                yield from self.rows(range(start, stop))


def _check(sp: FlinkSavepoint, op: OperatorState, max_parallelism: int, parallelism: int) -> tuple[bytes, list[str]]:
    """The header every new stream gets (the source's, byte for byte) and its state names, after
    refusing what cannot be re-partitioned."""
    header: bytes | None = None
    names: list[str] | None = None
    for st, stream in sp.keyed_streams(op):
        if st.raw_keyed is not None:
            raise FlinkSavepointError(f"{op.label()} subtask {st.index} holds raw keyed state, which statemorph "
                                      f"cannot re-partition")
        these = [m.name for m in stream.header.states]
        if names is None:
            names = these
            header = stream.source.read_at(0, stream.header_end, "keyed-state header")
            key_snapshot = stream.header.key_serializer
        elif sorted(these) != sorted(names):
            raise FlinkSavepointError(f"{op.label()}: subtask {st.index} registers other states than subtask 0")
    if header is None or names is None:
        raise FlinkSavepointError(f"{op.label()} has no keyed state")
    if key_snapshot.parsed is None:
        raise UnsupportedStateError(f"{op.label()}: unsupported state: its key serializer snapshot "
                                    f"{key_snapshot.class_name} is not one statemorph reads, so its keys' key groups "
                                    f"cannot be computed")
    key_serializer = key_snapshot.parsed.restore_serializer()
    if not has_java_hash(key_serializer):
        raise FlinkSavepointError(
            f"{op.label()}: keys written by {type(key_serializer).__name__} have no Java hashCode statemorph "
            f"reproduces, so they cannot be re-assigned to key groups (supported: int, long, short, byte, boolean, "
            f"char, float, double, String and RowData keys)")
    if parallelism != op.parallelism and any(s.managed_operator or s.raw_operator for s in op.subtasks or []):
        raise FlinkSavepointError(f"{op.label()} also holds operator (non-keyed) state; statemorph keeps its "
                                  f"parallelism ({op.parallelism}) rather than redistribute it")
    return header, names


def rescale_flink_savepoint(src: str | os.PathLike[str], dst: str | os.PathLike[str], operator: str, *,
                           max_parallelism: int, parallelism: int | None = None,
                           inline_threshold: int = DEFAULT_INLINE_THRESHOLD, spark: Any = None,
                           tasks: int | None = None) -> BootstrapReport:
    """Write ``dst``: savepoint ``src`` with the keyed state of ``operator`` (uid or uid hash)
    re-assigned to the key groups of ``max_parallelism`` and split over ``parallelism``
    subtasks (default: unchanged). A job whose operator sets the new max parallelism restores it.
    With ``spark`` the source is read by key-group ranges (``tasks`` of them), shuffled to the new
    subtasks and written on the executors (``src`` and ``dst`` on a filesystem they share)."""
    t0 = time.perf_counter()
    check_max_parallelism(max_parallelism)
    sp = FlinkSavepoint(src)
    op = sp.operator(operator)
    p = op.parallelism if parallelism is None else parallelism
    if not 0 < p <= max_parallelism:
        raise UsageError(f"parallelism must be in 1..max_parallelism ({max_parallelism}), got {p}")
    header, names = _check(sp, op, max_parallelism, p)
    key_snapshot = next(stream.header.key_serializer.raw for _, stream in sp.keyed_streams(op))
    source = os.path.abspath(os.fspath(src))
    ident = op.uid or op.uid_hash
    meta = copy.deepcopy(sp.metadata)
    op_index = sp.operators.index(op)
    new_op = meta.operators[op_index]
    old = {s.index: s for s in new_op.subtasks or []}
    new_op.max_parallelism, new_op.parallelism = max_parallelism, p
    new_op.subtasks = []
    for i in range(p):
        st = SubtaskState(index=i)
        if p == op.parallelism and i in old:
            o = old[i]
            st.managed_operator_flag, st.managed_operator = o.managed_operator_flag, o.managed_operator
            st.raw_operator_flag, st.raw_operator = o.raw_operator_flag, o.raw_operator
        new_op.subtasks.append(st)
    old_streams = [s.managed_keyed.delegate for s in op.subtasks or [] if s.managed_keyed is not None]
    replaced = {sp.directory.relative_name(d) for d in old_streams if isinstance(d, (FileHandle, RelativeFileHandle))}
    try:
        with StagedDirectory(dst, source=src) as staged:
            streams = SubtaskStreams(str(staged.temp.resolve()), header, max_parallelism, p,
                                     inline_threshold=inline_threshold, where=f"{dst} {op.label()}")
            if spark is None:
                rekey = _Rekey(source, ident, names, key_snapshot, max_parallelism, p)
                parts = write_parts_local(streams, rekey.rows())
            else:
                n = tasks if tasks is not None else max(1, 2 * int(spark.sparkContext.defaultParallelism))
                ranges = [(s.key_groups.start, s.key_groups.stop) for s in key_group_splits(op, n)]
                parts = write_parts_spark(spark, streams, _spark_rows(spark, _Rekey(
                    source, ident, names, key_snapshot, max_parallelism, p, ranges)), n)
            counts = finish_savepoint(staged.temp, streams, parts, meta, op_index, sp, replaced)
    except OSError as e:
        raise output_error(e, dst, "write the Flink savepoint") from e
    return BootstrapReport.of(dst, ident, max_parallelism, p, counts, spark, t0)


def _spark_rows(spark: Any, rekey: _Rekey) -> Any:
    # pyspark is the optional spark extra: imported only where Spark runs
    from pyspark.sql.pandas.types import from_arrow_schema

    assert rekey.ranges is not None
    if not rekey.ranges:
        return spark.createDataFrame([], from_arrow_schema(ROWS_SCHEMA))
    ids = spark.range(0, len(rekey.ranges), 1, len(rekey.ranges)).select("id")
    return ids.mapInArrow(rekey, from_arrow_schema(ROWS_SCHEMA))


__all__ = ["rescale_flink_savepoint"]
