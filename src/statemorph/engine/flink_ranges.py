"""What one key-group range of a Flink savepoint's keyed state goes through, the same on the
driver's threads (:mod:`.flink`) and in a Spark task (:mod:`.spark_flink`): its entries read
(decoded with the recorded serializers) and its values migrated by the bulk kernels. Both runners
import it; it imports neither, so the local run and the Spark tasks share this code without an
import circle.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from .. import arrow
from ..bulk import PreparedMigration
from ..bulk.chunks import DEFAULT_THREADS
from ..errors import SavepointError
from ..savepoint.flink import FlinkSavepoint, flink_state_schema
from ..savepoint.flink.description import describe_operators, find_keyed_operator
from ..savepoint.flink.layout import whole_keys, whole_values
from ..savepoint.flink.migrate_stream import ValueMigration
from ..savepoint.storage import Location
from ..typeutils import SnapshotRegistry, TypeSerializer, TypeSerializerSnapshot


def value_migration(prior_snapshot: TypeSerializerSnapshot,
                    new_serializer: TypeSerializer[Any]) -> ValueMigration:
    """One batch of values through the bulk kernels, on the calling thread: the rewriter runs
    its key groups on ``threads`` worker threads already. Resolved once here, not per batch (a
    large key group comes as many slices, each a batch), and its machine code compiled here,
    before those workers start (:meth:`PreparedMigration.compile_machine_code`)."""
    prepared = PreparedMigration(prior_snapshot, new_serializer)
    prepared.compile_machine_code()  # here, before the rewriter's workers start

    def migrate(values: pa.BinaryArray) -> pa.Array:
        return prepared(values, threads=1).values

    return migrate


def read_flink_state(path: str | os.PathLike[str] | Location, operator: str, state: str, *, decode: bool = True,
                     threads: int = DEFAULT_THREADS, registry: SnapshotRegistry | None = None,
                     key_groups: range | None = None,
                     reader: type[FlinkSavepoint] = FlinkSavepoint) -> Iterator[pa.RecordBatch]:
    """One keyed state (or timer queue) of one operator as record batches: the binary columns of
    the savepoint (key_group, key, namespace, [user_key | index], value[, ttl_timestamp]; a timer
    queue: key_group, timestamp, key, namespace), with ``decode`` the key, user key and value
    columns replaced by typed columns decoded with the recorded serializers and, for state in a
    window namespace, the window beside the raw namespace (``window_start`` / ``window_end``, or
    ``window_id``). ``key_groups`` restricts the read to a key-group range (one parallel task's
    share: only the streams and key groups of that range are read). ``reader`` opens the savepoint,
    the format's (:attr:`~statemorph.engine.formats.FlinkCanonical.reader`: a native savepoint's
    RocksDB instances are read as canonical streams)."""
    sp = reader(path, registry)
    read = _state_read(sp, operator, state, decode, registry)
    empty = True
    for batch in sp.iter_state_batches(operator, state, key_groups=key_groups):
        empty = False
        yield read.decoded(batch, threads)
    if empty:
        yield read.decoded(pa.RecordBatch.from_pylist([], schema=read.schema()), threads)


def read_flink_state_schema(path: str | os.PathLike[str] | Location, operator: str, state: str, *, decode: bool = True,
                            registry: SnapshotRegistry | None = None,
                            reader: type[FlinkSavepoint] = FlinkSavepoint) -> pa.Schema:
    """The Arrow schema :func:`read_flink_state` yields, from the headers alone (no entry is
    read): what a parallel reader declares before its tasks run."""
    sp = reader(path, registry)
    read = _state_read(sp, operator, state, decode, registry)
    return read.decoded(pa.RecordBatch.from_pylist([], schema=read.schema()), 1).schema


@dataclass
class _StateRead:
    """How one state's batches are decoded: its kind and TTL flag (the binary schema), the
    serializers of the columns that are decoded, and the namespace serializer (window columns)."""

    kind: str
    ttl: bool
    whole_values: bool
    """A list of a type statemorph does not read: one ``value_bytes`` row per key (layout.whole_values)."""
    decoders: dict[str, Any]
    namespace: Any = None
    whole_keys: bool = False
    """A map under a key statemorph cannot delimit: ``key_bytes`` and ``value_bytes`` (layout.whole_keys)."""

    def schema(self) -> pa.Schema:
        """The binary schema of the state's batches (before decoding)."""
        return flink_state_schema(self.kind, self.ttl, self.whole_values, self.whole_keys)

    def decoded(self, batch: pa.RecordBatch, threads: int) -> pa.RecordBatch:
        """``batch`` with each column that has a decoder replaced by its typed column, and the
        window columns after the namespace."""
        if not self.decoders:
            return batch
        # imported on first decode: keyed.windows brings pyarrow.compute, which a Spark task that
        # only migrates never needs (tests/spark: a range task imports only its runner)
        from ..keyed.windows import with_window_columns

        cols = [arrow.decode(col, self.decoders[name], threads=threads) if name in self.decoders else col
                for name, col in zip(batch.schema.names, batch.columns, strict=True)]
        return with_window_columns(pa.RecordBatch.from_arrays(cols, batch.schema.names), self.namespace)


def _state_read(sp: FlinkSavepoint, operator: str, state: str, decode: bool,
                registry: SnapshotRegistry | None) -> _StateRead:
    """The state's (or timer queue's) description and, with ``decode``, the serializers of its
    key, value and user key columns and its namespace."""
    op = find_keyed_operator(describe_operators(sp), operator)
    if op is None:
        raise SavepointError(f"{sp.path} has no operator with keyed state whose uid or uid hash is "
                             f"{operator!r}")
    timers = {m.name: m for m in op.header.states if m.is_timers}
    if state not in op.states and state not in timers:
        raise SavepointError(f"{op.label} has no keyed state {state!r} (states: "
                             f"{', '.join(repr(n) for n in [*op.states, *timers]) or 'none'})")
    meta = op.states[state].meta if state in op.states else timers[state]
    read = _StateRead(meta.kind, meta.ttl, whole_values(meta), {},
                      whole_keys=whole_keys(meta, op.header.key_serializer))
    if decode:
        read.decoders["key"] = op.key_snapshot(registry).restore_serializer()
        if not meta.is_timers:
            st = op.states[state]
            read.decoders["value"] = st.snapshot("value_serializer", registry).restore_serializer()
            if st.flink_kind == "map":
                read.decoders["user_key"] = st.snapshot("user_key_serializer", registry).restore_serializer()
        ns = meta.namespace_snapshot()
        if ns is not None and ns.parsed is not None:
            read.namespace = ns.parsed.restore_serializer()
    return read


__all__ = ["read_flink_state", "read_flink_state_schema", "value_migration"]
