"""Check, migrate and read Flink's own canonical savepoints with the one planner and the kernels.

A Flink savepoint keeps keyed state per operator, so a plan is one
:class:`~statemorph.engine.plan.RewritePlan` per keyed operator the new program names (the same
planner ``check`` and ``migrate`` use for the Parquet form, fed by
:mod:`statemorph.savepoint.flink.description`). Operators the program does not name are carried
over byte for byte. ``migrate`` hands the states the plan migrates to the format's rewriter
(:func:`statemorph.savepoint.flink.rewrite`) with the bulk kernels as the value migration; keys,
key groups, timers, operator state and every other file are copied as they are.
"""

from __future__ import annotations

import os
import struct
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from ..errors import ExitCode, IncompatibleSchemaError, SavepointError, UsageError
from ..savepoint.flink import FlinkSavepoint, flink_state_schema, rewrite
from ..savepoint.flink.description import FlinkOperatorDescription, describe_operators, find_keyed_operator
from ..savepoint.flink.layout import whole_values
from ..savepoint.flink.native import is_native
from ..savepoint.flink.native_view import NativeFlinkSavepoint, open_flink_savepoint
from ..savepoint.flink.operator_ids import find_operator, naming
from ..savepoint.storage import Location
from ..snapshot import SnapshotRegistry
from .plan import MIGRATE, RewritePlan, StatePlan, plan_rewrite

_ENVELOPE_VERSION = struct.pack(">i", 2)
"""Flink's top-level snapshot envelope starts with ``i32 2`` before the versioned snapshot."""

OperatorDescriptors = Mapping[str, Iterable[Any]]
"""Operator uid (or uid hash) → the new state descriptors of that operator."""


@dataclass
class FlinkPlan:
    """Every keyed operator the new program names, each with its plan (same surface as
    :class:`RewritePlan`: ``summary``, ``exit_status``, ``raise_if_incompatible``)."""

    source: str
    operators: list[tuple[FlinkOperatorDescription, RewritePlan]]

    @property
    def states(self) -> list[StatePlan]:
        return [s for _, p in self.operators for s in p.states]

    @property
    def incompatible(self) -> list[StatePlan]:
        return [s for _, p in self.operators for s in p.incompatible]

    @property
    def total_rows(self) -> int:
        return sum(p.total_rows for _, p in self.operators)

    @property
    def exit_status(self) -> ExitCode:
        return max((p.exit_status for _, p in self.operators), default=ExitCode.OK)

    def raise_if_incompatible(self) -> None:
        bad = [(op, s) for op, p in self.operators for s in p.incompatible]
        if bad:
            reasons = "\n".join(f"{op.label} state {s.name!r}: {s.reason}" for op, s in bad)
            raise IncompatibleSchemaError(
                f"{len(bad)} state(s) of {self.source} cannot be restored by the new schema (nothing was written)\n"
                f"{reasons}", reasons)

    @property
    def summary(self) -> str:
        lines = [f"Flink savepoint {self.source}"]
        for op, p in self.operators:
            lines.append(f"  {op.label} (max_parallelism {op.max_parallelism}): "
                         f"exit status {int(p.exit_status)}")
            lines += ["    " + s.line() for s in p.states]
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.summary

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.source, "format": "flink", "exit_status": int(self.exit_status),
                "operators": [{"uid": op.operator.uid or None, "uid_hash": op.operator.uid_hash,
                               "max_parallelism": op.max_parallelism, **p.to_dict()} for op, p in self.operators]}


def plan_flink_savepoint(path: str | os.PathLike[str] | Location, new_descriptors: OperatorDescriptors, *,
                         registry: SnapshotRegistry | None = None, new_states: bool = False) -> FlinkPlan:
    """Resolve the new descriptors of each named operator against the savepoint's headers (a
    remote savepoint: ``_metadata`` and the keyed-state headers are read, no key group)."""
    from ..savepoint.flink.operator_state_migrate import describe_operator_states_of

    source = _name(path)
    sp = open_flink_savepoint(path if isinstance(path, Location) else source, registry)
    operators = describe_operators(sp)
    plans: list[tuple[Any, RewritePlan]] = []
    for ident, descriptors in new_descriptors.items():
        op = find_keyed_operator(operators, ident)
        items = list(descriptors.values()) if isinstance(descriptors, Mapping) else list(descriptors)
        # operator state is read only for names the keyed states do not have (a keyed migration
        # never depends on an operator-state stream it does not change)
        op_states = None
        if op is None or any(getattr(d, "name", None) not in op.states for d in items):
            owner = find_operator(sp.operators, ident, lambda o: o)
            op_states = describe_operator_states_of(sp, owner) if owner is not None else None
        if op is None and op_states is None:
            known = ", ".join(repr(o.ident) for o in operators) or "none"
            raise SavepointError(f"{source} has no operator with keyed state or operator state whose uid or uid hash "
                                 f"is {ident!r} (operators with keyed state: {known})")
        operator_names = set(op_states.states) if op_states is not None else set()
        keyed = [d for d in items if getattr(d, "name", None) not in operator_names]
        of_operator = [d for d in items if getattr(d, "name", None) in operator_names]
        if op is not None and (keyed or not of_operator):
            plans.append((op, plan_rewrite(f"{source} {op.label}", op, keyed, registry=registry,
                                           new_states=new_states)))
        elif keyed and op_states is not None:
            names = ", ".join(repr(getattr(d, "name", d)) for d in keyed)
            raise SavepointError(f"{source} {op_states.label} has no keyed state and no operator state named {names} "
                                 f"(operator states: {', '.join(repr(n) for n in op_states.states)})")
        if op_states is not None and of_operator:
            plans.append((op_states, plan_rewrite(f"{source} {op_states.label} operator state", op_states,
                                                  of_operator, registry=registry, new_states=new_states)))
    return FlinkPlan(source, plans)


@dataclass
class FlinkMigrateReport:
    """What a migration of a Flink savepoint did."""

    source: str
    destination: str
    plan: FlinkPlan
    migrated: dict[tuple[str, str], int] = field(default_factory=dict)
    rewritten_streams: int = 0
    carried_files: int = 0
    seconds: float = 0.0
    engine: str = "local"

    @property
    def rows(self) -> int:
        return sum(self.migrated.values())

    def summary(self) -> str:
        lines = [f"{self.source} -> {self.destination}: {self.rewritten_streams} state stream(s) rewritten, "
                 f"{self.carried_files} file(s) carried over unchanged, {self.seconds:.1f}s"]
        lines += [f"  {op} state {st!r}: {n:,} values migrated" for (op, st), n in self.migrated.items()]
        return "\n".join(lines)


def _name(path: str | os.PathLike[str] | Location) -> str:
    return path.uri if isinstance(path, Location) else os.fspath(path)


def migrate_flink_savepoint(src: str | os.PathLike[str] | Location, dst: str | os.PathLike[str] | Location,
                            new_descriptors: OperatorDescriptors, *, threads: int = 2, on_error: str = "raise",
                            registry: SnapshotRegistry | None = None, spark: Any = None,
                            tasks: int | None = None) -> FlinkMigrateReport:
    """Write ``dst``: Flink savepoint ``src`` with every state the plan migrates in its new
    schema, in Flink's own format, which Flink restores with the new types. An incompatible
    state raises before anything is written; ``dst`` appears complete or not at all.

    With ``spark`` (a SparkSession) the subtask streams are rewritten by Spark tasks: each stream
    is cut into key-group ranges of about equal bytes (``tasks`` in all, default twice the default
    parallelism, planned from ``_metadata``), each range migrated by one task into a part file,
    and each stream assembled from its parts by one task
    (:func:`statemorph.engine.spark_flink.split_stream_jobs`). The savepoint and the staging
    directory must be on a filesystem every executor sees at the same path; only the new handles
    (bytes) come back to the driver, which writes ``_metadata`` and commits.

    ``src`` and ``dst`` may be URIs (``s3://...``, any ``pyarrow.fs`` filesystem) or
    :class:`~statemorph.savepoint.storage.Location` objects: the savepoint is then read in place
    (the driver reads ``_metadata`` and the keyed-state headers; the tasks read their key-group
    ranges) and the result written in place, unchanged files copied server-side (or, where the
    store cannot, streamed by Spark tasks), ``_metadata`` last
    (:class:`~statemorph.savepoint.storage.StagedPrefix`)."""
    if on_error != "raise":
        raise UsageError(f"on_error={on_error!r}: a Flink savepoint is migrated whole or not at all "
                         f"(on_error='raise'); dropping entries from Flink's key groups is not supported")
    t0 = time.perf_counter()
    src = Location.of(src) or src  # a URI is opened once (pyarrow resolves the bucket's region)
    dst = Location.of(dst) or dst
    plan = plan_flink_savepoint(src, new_descriptors, registry=registry)
    plan.raise_if_incompatible()
    if not isinstance(src, Location) and is_native(src):
        from .convert_native import migrate_native

        return migrate_native(src, dst, plan, lambda canonical: migrate_flink_savepoint(
            canonical, dst, new_descriptors, threads=threads, registry=registry, spark=spark, tasks=tasks), t0)
    changes: dict[tuple[str, str], tuple[bytes, Any]] = {}
    shipped: dict[tuple[int, str], tuple[bytes, bytes, bytes]] = {}  # (op index, state) -> snapshot bytes
    op_index = {o.operator_id: i for i, o in enumerate(FlinkSavepoint(src, registry).operators)}
    operator_changes: dict[tuple[str, str], tuple[bytes, Any]] = {}
    for op, p in plan.operators:
        for sp in p.states:
            if sp.action == MIGRATE:
                envelope = _ENVELOPE_VERSION + sp.value_snapshot
                migration = _value_migration(sp.meta.snapshot("value_serializer", registry), sp.new_serializer)
                if getattr(op, "operator_state", False):  # operator-state streams: rewritten by the driver
                    operator_changes[(op.ident, sp.name)] = (envelope, migration)
                    continue
                changes[(op.ident, sp.name)] = (envelope, migration)
                shipped[(op_index[op.operator.operator_id], sp.name)] = (envelope, sp.prior_value_snapshot,
                                                                         sp.value_snapshot)
    run_jobs = run_copies = None
    if spark is not None:
        from .spark_flink import split_copy_jobs, split_stream_jobs

        n = tasks if tasks is not None else max(1, 2 * int(spark.sparkContext.defaultParallelism))
        where = src if isinstance(src, Location) else os.path.abspath(src)
        run_jobs = split_stream_jobs(spark, where, shipped, threads, n)
        run_copies = split_copy_jobs(spark, where)
    done = rewrite(src, dst, changes, registry=registry, run_jobs=run_jobs, threads=threads, run_copies=run_copies,
                   operator_changes=operator_changes)
    return FlinkMigrateReport(_name(src), _name(dst), plan, dict(done.migrated), done.rewritten_streams,
                              done.carried_files, time.perf_counter() - t0, "local" if spark is None else "spark")


def _value_migration(prior_snapshot: Any, new_serializer: Any) -> Any:
    """One batch of values through the bulk kernels, on the calling thread: the rewriter runs
    its key groups on ``threads`` worker threads already. Resolved once here, not per batch (a
    large key group comes as many slices, each a batch)."""
    from ..bulk import PreparedMigration

    prepared = PreparedMigration(prior_snapshot, new_serializer)

    def migrate(values: pa.BinaryArray) -> pa.Array:
        return prepared(values, threads=1).values

    return migrate


def read_flink_state(path: str | os.PathLike[str] | Location, operator: str, state: str, *, decode: bool = True,
                     threads: int = 2, registry: SnapshotRegistry | None = None,
                     key_groups: range | None = None) -> Iterator[pa.RecordBatch]:
    """One keyed state (or timer queue) of one operator as record batches: the binary columns of
    the savepoint (key_group, key, namespace, [user_key | index], value[, ttl_timestamp]; a timer
    queue: key_group, timestamp, key, namespace), with ``decode`` the key, user key and value
    columns replaced by typed columns decoded with the recorded serializers and, for state in a
    window namespace, the window beside the raw namespace (``window_start`` / ``window_end``, or
    ``window_id``). ``key_groups`` restricts the read to a key-group range (one parallel task's
    share: only the streams and key groups of that range are read)."""
    sp = open_flink_savepoint(path, registry)
    read = _state_read(sp, operator, state, decode, registry)
    empty = True
    for batch in sp.iter_state_batches(operator, state, key_groups=key_groups):
        empty = False
        yield read.decoded(batch, threads)
    if empty:
        yield read.decoded(pa.RecordBatch.from_pylist([], schema=read.schema()), threads)


def read_flink_state_schema(path: str | os.PathLike[str] | Location, operator: str, state: str, *, decode: bool = True,
                            registry: SnapshotRegistry | None = None) -> pa.Schema:
    """The Arrow schema :func:`read_flink_state` yields, from the headers alone (no entry is
    read): what a parallel reader declares before its tasks run."""
    sp = open_flink_savepoint(path, registry)
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

    def schema(self) -> pa.Schema:
        """The binary schema of the state's batches (before decoding)."""
        return flink_state_schema(self.kind, self.ttl, self.whole_values)

    def decoded(self, batch: pa.RecordBatch, threads: int) -> pa.RecordBatch:
        """``batch`` with each column that has a decoder replaced by its typed column, and the
        window columns after the namespace."""
        if not self.decoders:
            return batch
        from .. import arrow
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
    read = _StateRead(meta.kind, meta.ttl, whole_values(meta), {})
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


def read_flink_state_table(path: str | os.PathLike[str], operator: str, state: str, *, decode: bool = True,
                           threads: int = 2, registry: SnapshotRegistry | None = None) -> pa.Table:
    """:func:`read_flink_state` as one Arrow table."""
    return pa.Table.from_batches(list(read_flink_state(path, operator, state, decode=decode, threads=threads,
                                                       registry=registry)))


def read_flink_operator_state(path: str | os.PathLike[str] | Location, operator: str, state: str, *,
                              decode: bool = True, registry: SnapshotRegistry | None = None) -> pa.Table:
    """One operator state (list, union list or broadcast state) of one operator as a table: a row
    per list element (``subtask``, ``index``, ``value_bytes``, ``value``) or per broadcast map
    entry (``subtask``, ``index``, ``key_bytes``, ``value_bytes``, ``key``, ``value``); ``decode=False``
    leaves out the decoded columns (any serializer, exact bytes)."""
    from ..savepoint.flink.operator_state_read import operator_state_table

    return operator_state_table(open_flink_savepoint(path, registry), operator, state, decode=decode)


__all__ = ["FlinkMigrateReport", "FlinkPlan", "OperatorDescriptors", "migrate_flink_savepoint",
           "plan_flink_savepoint", "read_flink_operator_state", "read_flink_state", "read_flink_state_schema",
           "read_flink_state_table"]



def inspect_flink_savepoint(path: str | os.PathLike[str], *, count_entries: bool = True,
                            registry: SnapshotRegistry | None = None, names: Iterable[str] = ()) -> dict[str, Any]:
    """What a Flink savepoint holds, as the stable ``statemorph inspect --json`` object:
    ``{"format": "flink", "metadata_version", "checkpoint_id", "operators": [{"name", "uid",
    "uid_hash", "parallelism", "max_parallelism", "named_by", "states": [{"name", "kind", "key_type",
    "namespace_type", "value_type", "user_key_type", "ttl", "entries", "bytes", "snapshot"}],
    "operator_states": [{"name", "kind", "mode", "key_type", "value_type", "key_snapshot",
    "value_snapshot", "entries_per_subtask", "entries"}]}]}`` (operator states: list, union list and
    broadcast state, see :mod:`statemorph.savepoint.flink.operator_state_read`).
    Types are in Flink SQL syntax where statemorph reads the snapshot, else the snapshot class;
    ``entries`` and ``bytes`` (uncompressed key + value bytes) need a pass over the data.
    ``named_by`` lists which of ``names`` (a schema file's operator names) find the operator and
    how (``uid``, ``uid_hash`` or ``derived_id``: :func:`~statemorph.savepoint.flink.operator_ids.naming`);
    ``unmatched_names`` the ones that find none."""
    from ..savepoint.flink.operator_state_read import describe_operator_states

    sp = open_flink_savepoint(path, registry)
    info = sp.inspect(count_entries=count_entries)
    named_by: dict[str, list[dict[str, str]]] = {}
    unmatched = []
    for ident in names:
        found = find_operator(sp.operators, ident, lambda o: o)
        how = naming(found, ident) if found is not None else None
        if found is None or how is None:
            unmatched.append(ident)
        else:
            named_by.setdefault(found.uid_hash, []).append({"name": ident, "by": how})
    described = {o.operator.uid_hash: o for o in describe_operators(sp)}
    by_hash = {op.uid_hash: op for op in sp.operators}
    operators = []
    for op_info in info.operators:
        op = described.get(op_info.uid_hash)
        states = []
        for st in op_info.states:
            desc = op.states.get(st.name) if op is not None else None
            states.append({
                "name": st.name, "kind": st.kind,
                "key_type": _role_text(desc, "key_serializer", st.key_serializer) if desc is not None
                else _type_text(op.key_snapshot, st.key_serializer) if op is not None else st.key_serializer,
                "namespace_type": _namespace_text(op, desc, st.name, st.namespace_serializer),
                "value_type": _role_text(desc, "value_serializer", st.value_serializer),
                "user_key_type": _role_text(desc, "user_key_serializer", st.user_key_serializer),
                "ttl": st.ttl, "entries": st.entries if count_entries else None,
                "bytes": st.bytes if count_entries else None, "snapshot": st.value_serializer,
            })
        operators.append({"name": op_info.name or None, "uid": op_info.uid or None, "uid_hash": op_info.uid_hash,
                          "parallelism": op_info.parallelism, "max_parallelism": op_info.max_parallelism,
                          "named_by": named_by.get(op_info.uid_hash, []), "states": states,
                          "operator_states": [o.to_json() for o in
                                              describe_operator_states(sp, by_hash[op_info.uid_hash])]})
    doc = {"format": "flink", "path": os.fspath(path), "metadata_version": info.metadata_version,
           "checkpoint_id": info.checkpoint_id, "operators": operators, "unmatched_names": unmatched}
    if isinstance(sp, NativeFlinkSavepoint):  # what it is, and the RocksDB files each subtask needs
        native = sp.native_info()
        doc["savepoint_format"] = native.format
        for o, n in zip(operators, [next((x for x in native.operators if x.uid_hash == o["uid_hash"]), None)
                                    for o in operators], strict=True):
            o["subtasks"] = [s.to_json() for s in n.subtasks] if n is not None else []
    return doc


def _role_text(desc: Any, role: str, class_name: str | None) -> str | None:
    if class_name is None:
        return None
    if desc is None:
        return class_name.rsplit(".", 1)[-1]
    opaque = desc.opaque_roles().get(role)
    return opaque if opaque is not None else _type_text(lambda: desc.snapshot(role), class_name)


def _namespace_text(op: FlinkOperatorDescription | None, desc: Any, state: str, class_name: str | None) -> str | None:
    """The namespace type of a state, or of a timer queue (no state description: the namespace
    inside its timer serializer, a window operator's window)."""
    if desc is not None or op is None:
        return _role_text(desc, "namespace_serializer", class_name)
    meta = next((m for m in op.header.states if m.name == state), None)
    snap = meta.namespace_snapshot() if meta is not None else None
    if snap is None or snap.parsed is None:
        return _role_text(None, "namespace_serializer", class_name)
    parsed = snap.parsed
    return _type_text(lambda: parsed, snap.class_name)


def _type_text(snapshot: Any, class_name: str) -> str:
    """A snapshot's serializer as its Flink SQL type, or the snapshot class when statemorph does
    not read it (Kryo, user classes)."""
    from ..errors import StatemorphError
    from ..schema_file import describe_serializer

    try:
        return describe_serializer(snapshot().restore_serializer())
    except StatemorphError:
        return class_name.rsplit(".", 1)[-1]


__all__ += ["inspect_flink_savepoint"]


_METADATA_COLUMNS = pa.schema([
    ("operator_uid", pa.string()), ("operator_uid_hash", pa.string()), ("operator_name", pa.string()),
    ("parallelism", pa.int32()), ("max_parallelism", pa.int32()), ("state", pa.string()), ("kind", pa.string()),
    ("key_type", pa.string()), ("namespace_type", pa.string()), ("value_type", pa.string()),
    ("user_key_type", pa.string()), ("ttl", pa.bool_()), ("entries", pa.int64()), ("bytes", pa.int64()),
])


def flink_savepoint_metadata(path: str | os.PathLike[str], *, count_entries: bool = True,
                             registry: SnapshotRegistry | None = None) -> pa.Table:
    """One row per keyed state (and timer queue) of every operator: Flink's ``savepoint_metadata``
    table function in Arrow form, from :func:`inspect_flink_savepoint` (types as Flink SQL text
    where statemorph reads the snapshot; ``entries`` and ``bytes`` null unless ``count_entries``)."""
    info = inspect_flink_savepoint(path, count_entries=count_entries, registry=registry)
    rows = [{"operator_uid": op["uid"], "operator_uid_hash": op["uid_hash"], "operator_name": op["name"],
             "parallelism": op["parallelism"], "max_parallelism": op["max_parallelism"], "state": st["name"],
             **{k: st[k] for k in ("kind", "key_type", "namespace_type", "value_type", "user_key_type", "ttl",
                                   "entries", "bytes")}}
            for op in info["operators"] for st in op["states"]]
    return pa.Table.from_pylist(rows, schema=_METADATA_COLUMNS)


__all__ += ["flink_savepoint_metadata"]
