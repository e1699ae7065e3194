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

from ..bulk.chunks import DEFAULT_THREADS
from ..bulk.serial_clock import SerialClock
from ..errors import ExitCode, IncompatibleSchemaError, SavepointError, StatemorphError, UsageError
from ..savepoint.flink import FlinkSavepoint, rewrite
from ..savepoint.flink.description import FlinkOperatorDescription, describe_operators, find_keyed_operator
from ..savepoint.flink.operator_ids import find_operator, naming
from ..savepoint.flink.operator_state_migrate import OperatorStatesDescription, describe_operator_states_of
from ..savepoint.flink.operator_state_read import describe_operator_states, operator_state_table
from ..savepoint.storage import Location
from ..typeutils import SnapshotRegistry, describe_serializer
from .flink_ranges import read_flink_state, read_flink_state_schema, value_migration
from .plan import MIGRATE, RewritePlan, StateDocument, StatePlan, plan_rewrite
from .spark_flink import split_copy_jobs, split_stream_jobs

_ENVELOPE_VERSION = struct.pack(">i", 2)
"""Flink's top-level snapshot envelope starts with ``i32 2`` before the versioned snapshot."""

OperatorDescription = FlinkOperatorDescription | OperatorStatesDescription
"""What one operator's plan was made from: its keyed states, or its operator states."""

OperatorDescriptors = Mapping[str, Iterable[Any]]
"""Operator uid (or uid hash) → the new state descriptors of that operator."""


@dataclass
class FlinkPlan:
    """Every keyed operator the new program names, each with its plan (same surface as
    :class:`RewritePlan`: ``summary``, ``exit_status``, ``raise_if_incompatible``)."""

    source: str
    operators: list[tuple[OperatorDescription, RewritePlan]]

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

    def check_fields(self, state_document: StateDocument) -> dict[str, Any]:
        """What ``check --json`` says of a Flink savepoint beside the states: ``format`` and its
        operators, each with the states of that operator."""
        return {"format": "flink",
                "operators": [{"uid": op.operator.uid or None, "uid_hash": op.operator.uid_hash,
                               "exit_status": int(p.exit_status), "states": [state_document(s) for s in p.states]}
                              for op, p in self.operators]}

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.source, "format": "flink", "exit_status": int(self.exit_status),
                "operators": [{"uid": op.operator.uid or None, "uid_hash": op.operator.uid_hash,
                               "max_parallelism": op.max_parallelism, **p.to_dict()} for op, p in self.operators]}


def plan_flink_savepoint(path: str | os.PathLike[str] | Location, new_descriptors: OperatorDescriptors, *,
                         registry: SnapshotRegistry | None = None, new_states: bool = False,
                         reader: type[FlinkSavepoint] = FlinkSavepoint) -> FlinkPlan:
    """Resolve the new descriptors of each named operator against the savepoint's headers (a
    remote savepoint: ``_metadata`` and the keyed-state headers are read, no key group).
    ``reader`` opens the savepoint: the format's (:attr:`~statemorph.engine.formats.FlinkCanonical.reader`;
    a native savepoint's is :class:`~statemorph.savepoint.flink.native_view.NativeFlinkSavepoint`)."""
    source = _name(path)
    sp = reader(path if isinstance(path, Location) else source, registry)
    operators = describe_operators(sp)
    plans: list[tuple[OperatorDescription, RewritePlan]] = []
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
    savepoint_format: str = "canonical"
    """What was written: a ``canonical`` savepoint, or a ``native`` one (RocksDB instances;
    ``rewritten_streams`` then counts the instances rebuilt)."""
    writers: dict[tuple[str, str], str] = field(default_factory=dict)
    """A native savepoint written: per migrated state, what wrote its SST files (``"sst"``, the
    SST writer, or ``"rocksdb: <reason>"``: RocksDB's ``SstFileWriter`` for a table format the SST
    writer does not write; :attr:`.native_writer.NativeWriteResult.writers`)."""
    timings: dict[str, Any] | None = None
    """With ``timings=True``: the run's serial fraction (:meth:`SerialClock.to_dict
    <statemorph.bulk.serial_clock.SerialClock.to_dict>`)."""

    @property
    def rows(self) -> int:
        return sum(self.migrated.values())

    def summary(self) -> str:
        rewritten = "RocksDB instance(s) rebuilt" if self.savepoint_format == "native" else "state stream(s) rewritten"
        lines = [f"{self.source} -> {self.destination}: {self.rewritten_streams} {rewritten}, "
                 f"{self.carried_files} file(s) carried over unchanged, {self.seconds:.1f}s"]
        lines += [f"  {op} state {st!r}: {n:,} values migrated{_written_by(self.writers.get((op, st)))}"
                  for (op, st), n in self.migrated.items()]
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        """The report as numbers (``statemorph migrate --json``; Flink keyed-state files are
        rewritten stream by stream; entries are counted for the migrated states only)."""
        out = {"source": self.source, "destination": self.destination, "engine": self.engine, "format": "flink",
               "savepoint_format": self.savepoint_format, "seconds": round(self.seconds, 3),
               "entries_migrated": self.rows,
               "rewritten_streams": self.rewritten_streams, "carried_files": self.carried_files,
               "states": [{"operator": op, "name": st, "entries_migrated": n,
                           **({"sst_writer": self.writers[(op, st)]} if (op, st) in self.writers else {})}
                          for (op, st), n in self.migrated.items()]}
        if self.timings is not None:
            out["timings"] = self.timings
        return out

    def details(self) -> list[str]:
        """Nothing beyond the summary, which lists every migrated state already."""
        return []

    def conclusion(self, destination: str) -> str:
        """The closing line of ``statemorph migrate``, naming ``destination`` as the user gave it."""
        what = "native savepoint (RocksDB backend only)" if self.savepoint_format == "native" else "savepoint"
        return (f"summary: {self.rows:,} values migrated in {self.seconds:.1f}s; new Flink {what} at {destination} "
                f"(restore it with execution.state-recovery.path)")


def _written_by(writer: str | None) -> str:
    """The summary's note on a state whose SST files RocksDB's ``SstFileWriter`` wrote."""
    if writer is None or writer == "sst":
        return ""
    return f" (SST files written by RocksDB's SstFileWriter, one call an entry: {writer.removeprefix('rocksdb: ')})"


def _name(path: str | os.PathLike[str] | Location) -> str:
    return path.uri if isinstance(path, Location) else os.fspath(path)


def check_on_error_whole(on_error: str) -> None:
    """A Flink savepoint is migrated whole or not at all: ``on_error`` other than ``raise`` is a
    usage error (for every writer of one)."""
    if on_error != "raise":
        raise UsageError(f"on_error={on_error!r}: a Flink savepoint is migrated whole or not at all "
                         f"(on_error='raise'); dropping entries from Flink's key groups is not supported")


def migrations(plan: FlinkPlan, registry: SnapshotRegistry | None = None
               ) -> Iterator[tuple[OperatorDescription, StatePlan, bytes, Any]]:
    """Every state ``plan`` migrates: its operator, its plan, the new per-value serializer snapshot
    in Flink's top-level envelope, and the value migration (the bulk kernels); what each writer
    (canonical, native) hands its rewriter."""
    for op, p in plan.operators:
        for sp in p.states:
            if sp.action == MIGRATE:
                yield (op, sp, _ENVELOPE_VERSION + sp.value_snapshot,
                       value_migration(sp.meta.snapshot("value_serializer", registry), sp.new_serializer))


def migrate_flink_savepoint(src: str | os.PathLike[str] | Location, dst: str | os.PathLike[str] | Location,
                            new_descriptors: OperatorDescriptors, *, threads: int = DEFAULT_THREADS,
                            on_error: str = "raise",
                            registry: SnapshotRegistry | None = None, spark: Any = None,
                            tasks: int | None = None, task_bytes: int | None = None,
                            timings: bool = False) -> FlinkMigrateReport:
    """Write ``dst``: Flink savepoint ``src`` with every state the plan migrates in its new
    schema, in Flink's own format, which Flink restores with the new types. An incompatible
    state raises before anything is written; ``dst`` appears complete or not at all.

    With ``spark`` (a SparkSession) the subtask streams are rewritten by Spark tasks: each stream
    is cut into key-group ranges of about equal bytes (``tasks`` in all, default twice the default
    parallelism, or about ``task_bytes`` stored bytes each; planned from ``_metadata``), a key
    group larger than a range's share cut into pieces at entry boundaries (a task scans it
    first), so there can be more tasks than key groups; each range or piece is migrated by one
    task into a part file, and each part copied into its place in the new state file by one task
    (:func:`statemorph.engine.spark_flink.split_stream_jobs`). The savepoint and the staging
    directory must be on a filesystem every executor sees at the same path; only the new handles
    (bytes) come back to the driver, which writes ``_metadata`` and commits.

    ``src`` and ``dst`` may be URIs (``s3://...``, any ``pyarrow.fs`` filesystem) or
    :class:`~statemorph.savepoint.storage.Location` objects: the savepoint is then read in place
    (the driver reads ``_metadata`` and the keyed-state headers; the tasks read their key-group
    ranges) and the result written in place, unchanged files copied server-side (or, where the
    store cannot, streamed by Spark tasks), ``_metadata`` last
    (:class:`~statemorph.savepoint.storage.StagedPrefix`).

    ``timings=True`` measures the run's serial fraction into the report's ``timings``
    (:mod:`statemorph.bulk.serial_clock`: the wall time no second core could take, over the
    process's CPU time; local engine: with Spark the parallel work runs in the executors)."""
    if task_bytes is not None and task_bytes < 1:
        raise UsageError(f"task_bytes={task_bytes}: a Spark task's share must be at least one byte")
    check_on_error_whole(on_error)
    if not timings:
        return _migrate(src, dst, new_descriptors, threads, registry, spark, tasks, task_bytes)
    with SerialClock() as clock:
        report = _migrate(src, dst, new_descriptors, threads, registry, spark, tasks, task_bytes)
    report.timings = clock.to_dict()
    return report


def _migrate(src: str | os.PathLike[str] | Location, dst: str | os.PathLike[str] | Location,
             new_descriptors: OperatorDescriptors, threads: int, registry: SnapshotRegistry | None,
             spark: Any, tasks: int | None, task_bytes: int | None) -> FlinkMigrateReport:
    t0 = time.perf_counter()
    src = Location.of(src) or src  # a URI is opened once (pyarrow resolves the bucket's region)
    dst = Location.of(dst) or dst
    plan = plan_flink_savepoint(src, new_descriptors, registry=registry)
    plan.raise_if_incompatible()
    changes: dict[tuple[str, str], tuple[bytes, Any]] = {}
    shipped: dict[tuple[int, str], tuple[bytes, bytes, bytes]] = {}  # (op index, state) -> snapshot bytes
    op_index = {o.operator_id: i for i, o in enumerate(FlinkSavepoint(src, registry).operators)}
    operator_changes: dict[tuple[str, str], tuple[bytes, Any]] = {}
    for op, sp, envelope, migration in migrations(plan, registry):
        if isinstance(op, OperatorStatesDescription):  # operator-state streams: rewritten by the driver
            operator_changes[(op.ident, sp.name)] = (envelope, migration)
            continue
        changes[(op.ident, sp.name)] = (envelope, migration)
        shipped[(op_index[op.operator.operator_id], sp.name)] = (envelope, sp.prior_value_snapshot, sp.value_snapshot)
    run_jobs = run_copies = None
    if spark is not None:
        n = tasks if tasks is not None else max(1, 2 * int(spark.sparkContext.defaultParallelism))
        where = src if isinstance(src, Location) else os.path.abspath(src)
        run_jobs = split_stream_jobs(spark, where, shipped, threads, n, task_bytes)
        run_copies = split_copy_jobs(spark, where)
    done = rewrite(src, dst, changes, registry=registry, run_jobs=run_jobs, threads=threads, run_copies=run_copies,
                   operator_changes=operator_changes)
    return FlinkMigrateReport(_name(src), _name(dst), plan, dict(done.migrated), done.rewritten_streams,
                              done.carried_files, time.perf_counter() - t0, "local" if spark is None else "spark")


def read_flink_state_table(path: str | os.PathLike[str], operator: str, state: str, *, decode: bool = True,
                           threads: int = DEFAULT_THREADS, registry: SnapshotRegistry | None = None,
                           reader: type[FlinkSavepoint] = FlinkSavepoint) -> pa.Table:
    """:func:`read_flink_state` as one Arrow table."""
    return pa.Table.from_batches(list(read_flink_state(path, operator, state, decode=decode, threads=threads,
                                                       registry=registry, reader=reader)))


def read_flink_operator_state(path: str | os.PathLike[str] | Location, operator: str, state: str, *,
                              decode: bool = True, registry: SnapshotRegistry | None = None,
                              reader: type[FlinkSavepoint] = FlinkSavepoint) -> pa.Table:
    """One operator state (list, union list or broadcast state) of one operator as a table: a row
    per list element (``subtask``, ``index``, ``value_bytes``, ``value``) or per broadcast map
    entry (``subtask``, ``index``, ``key_bytes``, ``value_bytes``, ``key``, ``value``); ``decode=False``
    leaves out the decoded columns (any serializer, exact bytes)."""
    return operator_state_table(reader(path, registry), operator, state, decode=decode)


__all__ = ["FlinkMigrateReport", "FlinkPlan", "OperatorDescriptors", "migrate_flink_savepoint",
           "plan_flink_savepoint", "read_flink_operator_state", "read_flink_state", "read_flink_state_schema",
           "read_flink_state_table"]



def inspect_flink_savepoint(path: str | os.PathLike[str], *, count_entries: bool = True,
                            registry: SnapshotRegistry | None = None, names: Iterable[str] = (),
                            reader: type[FlinkSavepoint] = FlinkSavepoint) -> dict[str, Any]:
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
    sp = reader(path, registry)
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
    return {"format": "flink", "path": os.fspath(path), "metadata_version": info.metadata_version,
            "checkpoint_id": info.checkpoint_id, "operators": operators, "unmatched_names": unmatched}


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
                             registry: SnapshotRegistry | None = None,
                             reader: type[FlinkSavepoint] = FlinkSavepoint) -> pa.Table:
    """One row per keyed state (and timer queue) of every operator: Flink's ``savepoint_metadata``
    table function in Arrow form, from :func:`inspect_flink_savepoint` (types as Flink SQL text
    where statemorph reads the snapshot; ``entries`` and ``bytes`` null unless ``count_entries``)."""
    info = inspect_flink_savepoint(path, count_entries=count_entries, registry=registry, reader=reader)
    rows = [{"operator_uid": op["uid"], "operator_uid_hash": op["uid_hash"], "operator_name": op["name"],
             "parallelism": op["parallelism"], "max_parallelism": op["max_parallelism"], "state": st["name"],
             **{k: st[k] for k in ("kind", "key_type", "namespace_type", "value_type", "user_key_type", "ttl",
                                   "entries", "bytes")}}
            for op in info["operators"] for st in op["states"]]
    return pa.Table.from_pylist(rows, schema=_METADATA_COLUMNS)


__all__ += ["flink_savepoint_metadata"]
