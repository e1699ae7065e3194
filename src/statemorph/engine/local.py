"""The local engine: savepoint rewrite, read and bootstrap over pyarrow, no Spark.

Streaming with bounded memory: one state is processed file by file and batch by batch through a
three-stage pipeline (read + decompress → migrate → compress + write), each stage in its own
thread with a bounded queue between them. pyarrow's Parquet reader and writer and the migration
kernels all release the GIL, so the stages overlap on both cores; memory is bounded by the queue
depth times the batch size plus one source file (files are verified against their sha256 before
use), whatever the entry count.
"""

from __future__ import annotations

import os
import queue
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

from ..bulk.chunks import DEFAULT_THREADS
from ..errors import SavepointError, StatemorphError
from ..savepoint.files import SavepointDir, SeenFiles
from ..savepoint.parquet.format import METADATA_FILE, ExtraFile, FlinkExtras, StateMetadata
from ..savepoint.parquet.reader import iter_state_batches, read_metadata
from ..savepoint.parquet.writer import SavepointWriter, StateWriter
from ..state.descriptors import StateDescriptor
from ..typeutils import TypeSerializerSnapshot, describe_serializer
from .batches import ColumnMigrator, StateDecoder, StateEncoder
from .plan import COPY, KEEP, MIGRATE, RewritePlan, StatePlan, plan_rewrite

Progress = Callable[[str, int], None]
"""``progress(state_name, rows_done_since_last_call)``."""

TransformFactory = Callable[[StatePlan], Callable[[pa.RecordBatch], pa.RecordBatch]]

DEFAULT_BATCH = 65536
QUEUE_DEPTH = 4
RATE_MIN_SECONDS, RATE_MIN_ENTRIES = 1.0, 10_000
"""A summary states a rate only for a run this long and this large: below that, the fixed costs
(planning, opening files, the metadata) decide the figure, and "77 migrated entries/s" for a
ten-entry savepoint says nothing about the engine. ``to_dict`` always has the number."""


@dataclass
class RewriteReport:
    """What a rewrite did: the plan, per-state rows written and the time taken."""

    source: str
    destination: str
    plan: RewritePlan
    engine: str
    rows: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0

    @property
    def skipped(self) -> dict[str, int]:
        """Entries dropped per state because their value could not be read (``on_error="skip"``)."""
        return {s.name: s.rows - self.rows[s.name] for s in self.plan.states
                if s.name in self.rows and self.rows[s.name] < s.rows}

    @property
    def migrated(self) -> int:
        """Entries of the states that were migrated (read; see :attr:`skipped` for those dropped)."""
        return sum(s.rows for s in self.plan.states if s.action == MIGRATE)

    @property
    def copied(self) -> int:
        """Entries carried over byte for byte (states copied or kept)."""
        return sum(s.rows for s in self.plan.states if s.action in (COPY, KEEP))

    @property
    def rate(self) -> float:
        """Migrated entries per second (0.0 when nothing was migrated)."""
        return self.migrated / self.seconds if self.seconds and self.migrated else 0.0

    def summary(self) -> str:
        meaningful = self.seconds >= RATE_MIN_SECONDS and self.migrated >= RATE_MIN_ENTRIES
        rate = f", {self.rate:,.0f} migrated entries/s" if meaningful else ""
        skipped = sum(self.skipped.values())
        dropped = f"; {skipped:,} unreadable entries dropped" if skipped else ""
        return (f"wrote {self.destination} with the {self.engine} engine in {self.seconds:.1f}s: "
                f"{self.migrated:,} entries migrated, {self.copied:,} copied as they are{rate}{dropped}")

    def to_dict(self) -> dict[str, Any]:
        """The report as numbers (``statemorph migrate --json``; shape documented in docs/cli.md)."""
        skipped = self.skipped
        return {
            "source": self.source,
            "destination": self.destination,
            "engine": self.engine,
            "seconds": round(self.seconds, 3),
            "entries_migrated": self.migrated,
            "entries_copied": self.copied,
            "entries_skipped": sum(skipped.values()),
            "migrated_entries_per_second": round(self.rate, 1),
            "states": [{"name": s.name, "kind": s.kind, "action": s.action, "entries_read": s.rows,
                        "entries_written": self.rows.get(s.name, s.rows), "entries_skipped": skipped.get(s.name, 0)}
                       for s in self.plan.states],
        }

    def details(self) -> list[str]:
        """One line per state (what ``migrate -v`` adds)."""
        return [f"  {st['name']} ({st['kind']}): {st['action']}, {st['entries_read']:,} entries read, "
                f"{st['entries_written']:,} written, {st['entries_skipped']:,} skipped"
                for st in self.to_dict()["states"]]

    def conclusion(self, destination: str) -> str:
        """The closing line of ``statemorph migrate``, naming ``destination`` as the user gave it."""
        if self.migrated:
            return f"summary: {self.migrated:,} entries migrated in {self.seconds:.1f}s; new savepoint at {destination}"
        return f"summary: nothing needed migration; states copied as they are to {destination}"


def add_planned_state(w: SavepointWriter, plan: StatePlan) -> StateWriter:
    """Declare ``plan``'s state in the new savepoint with the snapshots the plan decided."""
    m = plan.meta
    return w.add_state(plan.name, m.kind, value_serializer=plan.value_snapshot,
                       namespace_serializer=m.snapshot_bytes("namespace_serializer"),
                       user_key_serializer=plan.user_key_snapshot,
                       key_serializer=m.snapshot_bytes("key_serializer"),
                       operator=getattr(m, "operator", None), flink_kind=getattr(m, "flink_kind", None),
                       ttl=bool(getattr(m, "ttl", False)), whole_values=bool(getattr(m, "whole_values", False)),
                       whole_keys=bool(getattr(m, "whole_keys", False)))


def open_writer(dst: str | os.PathLike[str], plan: RewritePlan) -> SavepointWriter:
    """The new savepoint's writer; a savepoint converted from Flink keeps its ``flink/`` part (the
    files Flink needs back), copied and checked against their sha256."""
    md = plan.metadata
    props = dict(md.properties)
    props["statemorph.rewritten_from"] = os.path.basename(os.path.normpath(plan.source))
    w = SavepointWriter(dst, max_parallelism=md.max_parallelism, key_serializer=md.key_serializer,
                        properties=props, source=plan.source)
    extras = getattr(md, "flink", None)
    if extras is not None:
        try:
            w.metadata.flink = _copy_extras(plan.source, w, extras)
        except BaseException as e:
            w.abort(e)
            raise
    return w


def _copy_extras(src: str, w: SavepointWriter, extras: FlinkExtras) -> FlinkExtras:
    root = SavepointDir(src)

    def copy(entry: ExtraFile) -> ExtraFile:
        with root.open(entry.path, size=entry.size, recorded_in=METADATA_FILE) as f:
            out = w.write_extra(entry.path, f)
        if out.sha256 != entry.sha256:
            raise SavepointError(f"{root.path / entry.path}: sha256 {out.sha256} != {entry.sha256} recorded in "
                                 f"{METADATA_FILE} (damaged)")
        return out

    return FlinkExtras(copy(extras.metadata), {k: copy(v) for k, v in extras.headers.items()},
                       [copy(f) for f in extras.files])


def copy_state(src: str, w: SavepointWriter, plan: StatePlan, progress: Progress | None) -> int:
    """Copy a state's files byte for byte, streamed in one pass that also checks each file's
    sha256 (a mismatch aborts the whole rewrite); only regular files inside ``src`` are read."""
    sw = add_planned_state(w, plan)
    root, seen = SavepointDir(src), SeenFiles()
    for entry in plan.meta.files:
        with root.open(entry.path, size=entry.size, recorded_in=METADATA_FILE) as f:
            seen.add(f)
            sw.add_file(f, rows=entry.rows, sha256=entry.sha256)
        if progress:
            progress(plan.name, entry.rows)
    sw.close()
    return plan.rows


_END = object()


def _pipeline(source: Iterator[pa.RecordBatch], fn: Callable[[pa.RecordBatch], pa.RecordBatch],
              sink: Callable[[pa.RecordBatch], None]) -> None:
    """read → fn → write in three threads with bounded queues; the first error wins and stops all."""
    q_in: queue.Queue[Any] = queue.Queue(QUEUE_DEPTH)
    q_out: queue.Queue[Any] = queue.Queue(QUEUE_DEPTH)
    errors: list[BaseException] = []
    stop = threading.Event()

    def put(q: queue.Queue[Any], item: Any) -> bool:
        while not stop.is_set():
            try:
                q.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def get(q: queue.Queue[Any]) -> Any:
        while not stop.is_set():
            try:
                return q.get(timeout=0.1)
            except queue.Empty:
                continue
        return _END

    def reader() -> None:
        try:
            for b in source:
                if not put(q_in, b):
                    return
        except BaseException as e:  # noqa: BLE001 - handed to the caller
            errors.append(e)
            stop.set()
        finally:
            put(q_in, _END)

    def worker() -> None:
        try:
            while True:
                b = get(q_in)
                if b is _END:
                    break
                if not put(q_out, fn(b)):
                    return
        except BaseException as e:  # noqa: BLE001
            errors.append(e)
            stop.set()
        finally:
            put(q_out, _END)

    threads = [threading.Thread(target=reader, daemon=True), threading.Thread(target=worker, daemon=True)]
    for t in threads:
        t.start()
    try:
        while True:
            b = get(q_out)
            if b is _END:
                break
            sink(b)
    except BaseException as e:
        errors.append(e)
        stop.set()
    finally:
        if errors:
            stop.set()
        for t in threads:
            t.join()
    if errors:
        raise errors[0]


def migrate_state(src: str, w: SavepointWriter, plan: StatePlan, transform: Callable[[pa.RecordBatch], pa.RecordBatch],
                  progress: Progress | None, batch_size: int) -> int:
    sw = add_planned_state(w, plan)
    done = 0

    def sink(b: pa.RecordBatch) -> None:
        nonlocal done
        sw.write(b)
        done += b.num_rows
        if progress:
            progress(plan.name, b.num_rows)

    _pipeline(iter_state_batches(src, plan.meta, batch_size=batch_size, metadata=plan.savepoint_meta),
              transform, sink)
    sw.close()
    return done


def migrate_parquet_savepoint(src: str | os.PathLike[str], dst: str | os.PathLike[str],
                              new_descriptors: Iterable[StateDescriptor] | Mapping[str, StateDescriptor], *,
                              threads: int = DEFAULT_THREADS, batch_size: int = DEFAULT_BATCH, on_error: str = "raise",
                              progress: Progress | None = None,
                              transform: TransformFactory | None = None) -> RewriteReport:
    """Rewrite savepoint ``src`` (the Parquet form) into a new savepoint ``dst`` for the new
    descriptors, on this machine (:func:`statemorph.engine.migrate_savepoint` takes either format).

    States that need no migration are copied as they are (file bytes unchanged); states compatible
    after migration have their ``value`` column rewritten by the kernels; an incompatible state
    raises :class:`~statemorph.errors.IncompatibleSchemaError` before anything is written. ``dst``
    appears atomically, complete, or not at all. ``transform`` replaces the migration step (the
    benchmarks use it for an identity baseline); with it every state goes through the data pass.
    """
    t0 = time.perf_counter()
    src = os.fspath(src)
    plan = plan_rewrite(src, read_metadata(src), new_descriptors)
    plan.raise_if_incompatible()
    report = RewriteReport(src, os.fspath(dst), plan, "local")
    with open_writer(dst, plan) as w:
        for sp in plan.states:
            if sp.action == MIGRATE or transform is not None:
                fn = transform(sp) if transform is not None else ColumnMigrator(
                    sp.prior_value_snapshot, sp.new_serializer, "value", threads=threads, on_error=on_error).prepared()
                report.rows[sp.name] = migrate_state(src, w, sp, fn, progress, batch_size)
            else:
                report.rows[sp.name] = copy_state(src, w, sp, progress)
    report.seconds = time.perf_counter() - t0
    return report


def inspect_savepoint(path: str) -> dict[str, Any]:
    """What a savepoint in the Parquet form holds, as the ``statemorph inspect --json`` document
    (docs/cli.md): format version, max parallelism, key type, and per state its kind, types (Flink
    SQL syntax), TTL flag, entries, bytes and files; ``problems`` says why a type is unreadable."""
    md = read_metadata(path)
    problems: dict[str, str] = {}
    key = _type_of(md.key_snapshot, "key_serializer", problems)
    states = [_state_document(st) for st in md.states.values()]
    return {
        "format": "parquet",
        "path": path,
        "format_version": md.format_version,
        "max_parallelism": md.max_parallelism,
        "key_type": key,
        "entries": sum(s["entries"] for s in states),
        "bytes": sum(s["bytes"] for s in states) + os.path.getsize(os.path.join(path, METADATA_FILE)),
        "states": states,
        "problems": problems,
    }


def _state_document(st: StateMetadata) -> dict[str, Any]:
    """One state of :func:`inspect_savepoint`'s document."""
    problems: dict[str, str] = {}
    opaque = st.opaque_roles()

    def type_of(role: str) -> str | None:
        return opaque.get(role) or _type_of(lambda: st.snapshot(role), role, problems)

    doc: dict[str, Any] = {
        "name": st.name,
        "kind": st.kind.value,
        "key_type": type_of("key_serializer"),
        "namespace_type": type_of("namespace_serializer"),
        "value_type": type_of("value_serializer"),
        "user_key_type": type_of("user_key_serializer") if st.user_key_serializer is not None else None,
        "ttl": bool(st.ttl),
        "operator": st.operator,
        "flink_kind": st.flink_kind,
        "entries": st.rows,
        "bytes": sum(f.size for f in st.files),
    }
    try:
        doc["value_snapshot"] = st.snapshot("value_serializer").IDENTIFIER
    except StatemorphError:
        doc["value_snapshot"] = None
    doc["files"] = [{"path": f.path, "entries": f.rows, "bytes": f.size, "sha256": f.sha256} for f in st.files]
    doc["problems"] = problems
    return doc


def _type_of(snapshot: Callable[[], TypeSerializerSnapshot], role: str, problems: dict[str, str]) -> str | None:
    """The Flink SQL spelling of the serializer a snapshot restores, or None, with the reason
    under ``problems[role]``, when it cannot be read."""
    try:
        return describe_serializer(snapshot().restore_serializer())
    except StatemorphError as e:
        problems[role] = str(e)
        return None


def read_state(savepoint: str | os.PathLike[str], state: str, *, flatten: bool = True, threads: int = DEFAULT_THREADS,
               batch_size: int = DEFAULT_BATCH) -> Iterator[pa.RecordBatch]:
    """Stream one state's entries decoded into typed columns (see :class:`StateDecoder`)."""
    meta = read_metadata(savepoint)
    st = meta.state(state)
    dec = StateDecoder.for_state(st, flatten=flatten, threads=threads)
    for b in iter_state_batches(savepoint, st, batch_size=batch_size, metadata=meta):
        yield dec(b)


def read_state_table(savepoint: str | os.PathLike[str], state: str, *, flatten: bool = True,
                     threads: int = DEFAULT_THREADS) -> pa.Table:
    """One state's entries decoded, as one Arrow table."""
    meta = read_metadata(savepoint)
    dec = StateDecoder.for_state(meta.state(state), flatten=flatten, threads=threads)
    has_index = meta.state(state).kind.value == "list"
    batches = list(read_state(savepoint, state, flatten=flatten, threads=threads))
    return pa.Table.from_batches(batches, schema=dec.output_schema(has_index))


def write_state(dst: str | os.PathLike[str], data: pa.Table | Iterable[pa.RecordBatch], *, name: str,
                key_serializer: Any, value_serializer: Any, kind: str = "value", user_key_serializer: Any = None,
                max_parallelism: int = 128, key: str = "key", value: str | list[str] = "value",
                user_key: str = "user_key", index: str = "index", threads: int = DEFAULT_THREADS,
                progress: Progress | None = None) -> Path:
    """Bootstrap: build a savepoint with one state from typed Arrow data, encoded in bulk."""
    enc = StateEncoder(key_serializer, value_serializer, max_parallelism=max_parallelism, kind=kind, key=key,
                       value=value, user_key_serializer=user_key_serializer, user_key=user_key, index=index,
                       threads=threads)
    batches = data.to_batches(DEFAULT_BATCH) if isinstance(data, pa.Table) else data
    with SavepointWriter(dst, max_parallelism=max_parallelism, key_serializer=key_serializer) as w:
        sw = w.add_state(name, kind, value_serializer=value_serializer, user_key_serializer=user_key_serializer)

        def sink(b: pa.RecordBatch) -> None:
            sw.write(b)
            if progress:
                progress(name, b.num_rows)

        _pipeline(iter(batches), enc, sink)
        sw.close()
    return Path(dst)


__all__ = ["RewriteReport", "inspect_savepoint", "migrate_parquet_savepoint", "read_state", "read_state_table",
           "write_state"]
