"""Converting savepoints between Flink's canonical form and statemorph's Parquet form, losslessly.

Flink → Parquet: every keyed state of every operator becomes one Parquet dataset named
``<operator uid or uid hash>/<state>`` (the reader's columns: the same binary key / namespace /
user key / value bytes, plus ``ttl_timestamp`` for TTL state; timers as key group, timestamp, key,
namespace). What is not a table is kept beside them under ``flink/`` (format version 2): the
``_metadata`` with its keyed-state streams emptied (handle codes, names, key-group ranges and
subtask split kept), each stream's keyed-state header (serializer snapshots as exact bytes), and
every carried file (operator state, raw keyed state).

Parquet → Flink: the ``_metadata`` is rebuilt from that skeleton; each subtask's stream is written
again from the tables (its header, then its key groups in ascending order, each state's run in the
order the rows were stored) with the same key-group range, the same file name and the same inline
or file choice, so Flink restores it with the same content. Both directions write atomically (a
claimed destination, a staged temporary directory, fsync, rename) and never modify the source.
"""

from __future__ import annotations

import copy
import os
import uuid
from array import array
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa

from ..errors import FlinkSavepointError, NotASavepointError, SavepointError, UsageError
from ..keyed.kinds import StateKind
from ..savepoint.files import SavepointDir, StagedDirectory, UsedOnce, inside, output_error
from ..savepoint.flink import is_flink_savepoint
from ..savepoint.flink.envelope import snapshot_from_envelope
from ..savepoint.flink.files import file_handles
from ..savepoint.flink.handles import (
    ByteStreamHandle,
    FileHandle,
    KeyGroupsHandle,
    RelativeFileHandle,
    file_name,
)
from ..savepoint.flink.keyed_blocks import StateRun
from ..savepoint.flink.keyed_header import (
    VALUE_SERIALIZER,
    KeyedHeader,
    StateMetaInfo,
    parse_keyed_header,
)
from ..savepoint.flink.keyed_writer import KeyedStreamWriter, entries_from_batch
from ..savepoint.flink.layout import StateLayout, whole_values
from ..savepoint.flink.metadata import (
    METADATA_FILE_NAME,
    CheckpointMetadata,
    OperatorState,
    parse_metadata,
    serialize_metadata,
)
from ..savepoint.flink.reader import PARQUET_KIND, FlinkSavepoint
from ..savepoint.parquet.format import METADATA_FILE, ExtraFile, FlinkExtras, SavepointMetadata, StateMetadata
from ..savepoint.parquet.reader import read_metadata, read_state_table
from ..savepoint.parquet.writer import SavepointWriter, StateWriter
from ..snapshot import SnapshotRegistry
from .flink import _ENVELOPE_VERSION

EXTRA_DIR = "flink"
FILES_DIR = f"{EXTRA_DIR}/files/"
MAX_EXTRA_READ = 1 << 30
"""A kept ``_metadata`` or header larger than this is refused before it is read."""


@dataclass
class ConvertReport:
    """What a conversion wrote: the direction, the tables (states) and their rows, the streams."""

    source: str
    destination: str
    direction: str
    states: dict[str, int]
    streams: int
    carried_files: int

    def to_dict(self) -> dict[str, object]:
        return {"source": self.source, "destination": self.destination, "direction": self.direction,
                "states": [{"name": k, "rows": v} for k, v in self.states.items()], "streams": self.streams,
                "carried_files": self.carried_files}

    def summary(self) -> str:
        rows = sum(self.states.values())
        return (f"converted {self.source} -> {self.destination} ({self.direction}): {len(self.states)} states, "
                f"{rows:,} rows, {self.streams} keyed-state streams, {self.carried_files} carried files")


def convert_savepoint(src: str | os.PathLike[str], dst: str | os.PathLike[str], *,
                      registry: SnapshotRegistry | None = None, rows_per_file: int = 1_000_000,
                      to: str | None = None) -> ConvertReport:
    """Convert ``src`` into the other form at ``dst``: a Flink savepoint becomes the Parquet form,
    a Parquet savepoint converted from Flink becomes a Flink savepoint again; a native savepoint
    or retained checkpoint becomes the Parquet form or, ``to="canonical"``, a canonical savepoint
    (:mod:`.convert_native`)."""
    from ..savepoint.flink.native import is_native

    if is_native(src):
        from .convert_native import convert_native

        return convert_native(src, dst, to=to or "parquet", registry=registry, rows_per_file=rows_per_file)
    if to == "canonical":
        raise UsageError(f"--to canonical converts a native savepoint or a retained RocksDB checkpoint; {src} is "
                         f"neither")
    if is_flink_savepoint(str(src)):
        return flink_to_parquet(src, dst, registry=registry, rows_per_file=rows_per_file)
    if os.path.lexists(os.path.join(src, METADATA_FILE)):
        return parquet_to_flink(src, dst, registry=registry)
    raise NotASavepointError.at(src)


# -- Flink -> Parquet ------------------------------------------------------------------------------

def state_table_name(op: OperatorState, state: str) -> str:
    """The Parquet form's name of a converted state: ``<operator uid or uid hash>/<state>``."""
    return f"{op.uid or op.uid_hash}/{state}"


def _kind(m: StateMetaInfo, where: str) -> tuple[StateKind, str | None]:
    if m.is_timers:
        return StateKind.VALUE, "timers"
    kind = PARQUET_KIND.get(m.kind)
    if kind is None:
        raise FlinkSavepointError(f"{where}: state {m.name!r} is {m.state_type} state, which has no table form")
    return StateKind(kind), (m.kind if m.kind in ("reducing", "aggregating") else None)


def _raw(snap: object) -> bytes:
    return bytes(getattr(snap, "raw", b"") or b"") if snap is not None else b""


def flink_to_parquet(src: str | os.PathLike[str], dst: str | os.PathLike[str], *,
                     registry: SnapshotRegistry | None = None, rows_per_file: int = 1_000_000) -> ConvertReport:
    """Write the Parquet form of the Flink savepoint ``src`` at ``dst`` (see the module docstring)."""
    sp = FlinkSavepoint(src, registry)
    skeleton = copy.deepcopy(sp.metadata)
    keyed = [op for op in sp.operators if any(st.managed_keyed for st in op.subtasks or [])]
    max_par = max([op.max_parallelism for op in keyed] or [max([op.max_parallelism for op in sp.operators] or [1])])
    key_ser = b""
    for op in keyed:
        for _, stream in sp.keyed_streams(op):
            key_ser = stream.header.key_serializer.raw
            break
        break
    writer = SavepointWriter(dst, max_parallelism=max(1, max_par), key_serializer=key_ser,
                             rows_per_file=rows_per_file, source=src)
    with writer:
        headers: dict[str, ExtraFile] = {}
        streams = 0
        kept: dict[str, tuple[OperatorState, StateMetaInfo, StateWriter]] = {}
        keyed_files: set[str] = set()
        for oi, op in enumerate(sp.operators):
            for st, stream in sp.keyed_streams(op):
                streams += 1
                head = stream.source.read_at(0, stream.header_end, "keyed-state header")
                headers[f"{oi}/{st.index}"] = writer.write_extra(f"{EXTRA_DIR}/keyed/{oi}/{st.index}.header", head)
                for m in stream.header.states:
                    name = state_table_name(op, m.name)
                    if name in kept:
                        continue
                    kind, flink_kind = _kind(m, stream.where)
                    value, ttl = m.value_snapshot_unwrapped()
                    kept[name] = op, m, writer.add_state(
                        name, kind, value_serializer=_raw(value),
                        namespace_serializer=_raw(m.namespace_snapshot()),
                        user_key_serializer=_raw(m.user_key_snapshot()) if kind is StateKind.MAP else None,
                        key_serializer=stream.header.key_serializer.raw,
                        operator=op.uid or op.uid_hash, flink_kind=flink_kind, ttl=ttl and flink_kind != "timers",
                        whole_values=whole_values(m),
                    )
            _empty_keyed_streams(sp, skeleton.operators[oi], keyed_files)
        for op, m, out in kept.values():
            for batch in sp.iter_state_batches(op.uid or op.uid_hash, m.name):
                out.write(batch)
            out.close()
        carried = _carry_into(sp, skeleton, keyed_files, writer)
        sp.directory.relativize(skeleton)
        meta_entry = writer.write_extra(f"{EXTRA_DIR}/{METADATA_FILE_NAME}", serialize_metadata(skeleton))
        writer.metadata.flink = FlinkExtras(meta_entry, headers, carried)
        rows = {name: writer.metadata.states[name].rows for name in kept}
    return ConvertReport(str(src), str(dst), "flink-to-parquet", rows, streams, len(carried))


def _empty_keyed_streams(sp: FlinkSavepoint, op: OperatorState, keyed_files: set[str]) -> None:
    """The skeleton keeps each managed keyed handle (code, range, name, inline or file) without
    data: the stream is rebuilt from the tables."""
    for st in op.subtasks or []:
        h = st.managed_keyed
        if h is None:
            continue
        h.offsets = array("q", bytes(8 * len(h.offsets)))
        if isinstance(h.delegate, ByteStreamHandle):
            h.delegate = ByteStreamHandle(h.delegate.name, b"")
        elif isinstance(h.delegate, (FileHandle, RelativeFileHandle)):
            rel = sp.directory.relative_name(h.delegate)
            keyed_files.add(rel)
            h.delegate = RelativeFileHandle(rel, 0)


def _carry_into(sp: FlinkSavepoint, skeleton: CheckpointMetadata, keyed_files: set[str],
                writer: SavepointWriter) -> list[ExtraFile]:
    """Every file the skeleton still references (operator state, raw keyed state) and any other
    regular file next to ``_metadata``, copied under ``flink/files/`` with its sha256."""
    out = []
    for rel, size in sp.directory.carried_files(skeleton, keyed_files).items():
        with sp.directory.files.open(rel, size=size, recorded_in=METADATA_FILE_NAME) as f:
            out.append(writer.write_extra(FILES_DIR + rel, f))
    return out


# -- Parquet -> Flink ------------------------------------------------------------------------------

def _read_extra(root: SavepointDir, entry: ExtraFile) -> bytes:
    if entry.size > MAX_EXTRA_READ:
        raise SavepointError(f"{root.path / entry.path}: {entry.size} bytes is more than {MAX_EXTRA_READ}")
    with root.open(entry.path, size=entry.size, recorded_in=METADATA_FILE) as f:
        f.verify_sha256(entry.sha256, METADATA_FILE)
        with f.reader() as r:
            data = r.read()
    if len(data) != entry.size:
        raise SavepointError(f"{root.path / entry.path}: read {len(data)} bytes, {entry.size} recorded")
    return data


def parquet_to_flink(src: str | os.PathLike[str], dst: str | os.PathLike[str], *,
                     registry: SnapshotRegistry | None = None) -> ConvertReport:
    """Write the Flink savepoint ``dst`` from a Parquet savepoint converted from Flink."""
    root = SavepointDir(src)
    pm = read_metadata(root)
    extras = pm.flink
    if extras is None:
        raise UsageError(f"{src}: this Parquet savepoint was not converted from a Flink savepoint (no 'flink' "
                         f"section in {METADATA_FILE}); only such savepoints convert back")
    meta = parse_metadata(_read_extra(root, extras.metadata), f"{src}/{extras.metadata.path}")
    carried = _output_files(meta, extras, f"{src}/{extras.metadata.path}")
    by_op: dict[str, dict[str, StateMetadata]] = {}
    for name, table in pm.states.items():
        if table.operator is not None and name.startswith(table.operator + "/"):
            by_op.setdefault(table.operator, {})[name[len(table.operator) + 1:]] = table
    rows: dict[str, int] = {}
    streams = 0
    with StagedDirectory(dst, source=src) as staged:
        tmp = staged.temp
        try:
            for rel, extra in carried.items():
                target = inside(tmp, rel, f"{src}: carried file")
                target.parent.mkdir(parents=True, exist_ok=True)
                with root.open(extra.path, size=extra.size, recorded_in=METADATA_FILE) as f:
                    if f.copy_to(target) != extra.sha256:
                        raise SavepointError(f"{root.path / extra.path}: sha256 differs from {METADATA_FILE} (damaged)")
            for oi, op in enumerate(meta.operators):
                for st in op.subtasks or []:
                    if st.managed_keyed is None:
                        continue
                    entry = extras.headers.get(f"{oi}/{st.index}")
                    if entry is None:
                        raise SavepointError(f"{src}: no keyed-state header for {op.label()} subtask {st.index}")
                    states = by_op.get(op.uid or op.uid_hash, {})
                    st.managed_keyed = _write_stream(root, pm, op, st.managed_keyed, _read_extra(root, entry),
                                                     states, tmp, f"{src}: {op.label()} subtask {st.index}",
                                                     registry, rows)
                    streams += 1
            for states in by_op.values():
                for table in states.values():
                    if rows.get(table.name, 0) != table.rows:
                        raise SavepointError(
                            f"{src}: state {table.name!r} has {table.rows} rows but the keyed-state streams' key-group "
                            f"ranges take {rows.get(table.name, 0)}: rows outside every subtask's range would be lost")
            with open(tmp / METADATA_FILE_NAME, "xb") as out:
                out.write(serialize_metadata(meta))
                out.flush()
                os.fsync(out.fileno())
        except OSError as e:
            raise output_error(e, dst, "write the Flink savepoint") from e
    return ConvertReport(str(src), str(dst), "parquet-to-flink", rows, streams, len(extras.files))


def _output_files(meta: CheckpointMetadata, extras: FlinkExtras, where: str) -> dict[str, ExtraFile]:
    """The carried files by the name they get in the Flink savepoint, after checking, before
    anything is written, that every output file is named once and stays inside it: ``_metadata``,
    each carried file (under ``flink/files/``) and each keyed-state stream the skeleton names
    (:func:`~statemorph.savepoint.files.check_relative_path`, :class:`UsedOnce`), and that every
    other file handle of the skeleton names a carried file of the size it records."""
    names = UsedOnce(SavepointError, where)
    names.add(METADATA_FILE_NAME, "the new _metadata")
    carried: dict[str, ExtraFile] = {}
    for i, extra in enumerate(extras.files):
        rel = extra.path[len(FILES_DIR):]
        if not extra.path.startswith(FILES_DIR) or not rel:
            raise SavepointError(f"{where}: carried file {extra.path!r} is not under {FILES_DIR}")
        names.add(inside(Path(), rel, f"{where}: carried file {METADATA_FILE} flink.files[{i}]").as_posix(),
                  f"carried file {METADATA_FILE} flink.files[{i}]")
        carried[rel] = extra
    keyed = {id(st.managed_keyed.delegate) for op in meta.operators for st in op.subtasks or []
             if st.managed_keyed is not None}
    for h in file_handles(meta.operators):
        rel = file_name(h, where)
        if id(h) in keyed:
            names.add(rel, "a keyed-state stream")
        elif rel not in carried or carried[rel].size != h.size:
            raise SavepointError(f"{where}: a state handle names file {rel!r} of {h.size} bytes, which is not among "
                                 f"the carried files ({METADATA_FILE}: flink.files)")
    return carried


def _write_stream(root: SavepointDir, pm: SavepointMetadata, op: OperatorState, handle: KeyGroupsHandle,
                  head: bytes, states: dict[str, StateMetadata], tmp: Path, where: str,
                  registry: SnapshotRegistry | None, rows: dict[str, int]) -> KeyGroupsHandle:
    """One subtask's keyed-state stream rebuilt from the tables: the kept header, then every key
    group of the handle's range with the states' runs in state-id order."""
    header = parse_keyed_header(head, len(head), where, registry)
    _adopt_migrated_snapshots(header, states, where, registry)
    kg_range = handle.key_groups
    per_state: list[tuple[int, Iterator[tuple[int, list[bytes], list[bytes]]]]] = []
    for sid, m in enumerate(header.states):
        st = states.get(m.name)
        if st is None:
            raise SavepointError(f"{where}: the header lists state {m.name!r}, which has no table "
                                 f"{op.uid or op.uid_hash}/{m.name}")
        layout = StateLayout(m, header.key_serializer, op.max_parallelism, f"{where} state {m.name!r}")
        table = read_state_table(root, st, key_group_range=(kg_range.start, kg_range.stop - 1), metadata=pm)
        rows[st.name] = rows.get(st.name, 0) + table.num_rows
        per_state.append((sid, _by_key_group(layout, table)))
    inline = isinstance(handle.delegate, ByteStreamHandle)
    name = file_name(handle.delegate, where) if isinstance(handle.delegate, RelativeFileHandle) else str(uuid.uuid4())
    with KeyedStreamWriter(tmp, name, header, handle.start_key_group, len(handle.offsets)) as out:
        heads = {sid: next(it, None) for sid, it in per_state}
        its = dict(per_state)
        while True:
            present = [h[0] for h in heads.values() if h is not None]
            if not present:
                break
            kg = min(present)
            runs = []
            for sid in sorted(heads):
                h = heads[sid]
                if h is not None and h[0] == kg:
                    runs.append(StateRun(sid, h[1], h[2]))
                    heads[sid] = next(its[sid], None)
            out.add_key_group(kg, runs)
        inline_name = handle.delegate.name if isinstance(handle.delegate, ByteStreamHandle) else name
        return out.finish(inline, inline_name, handle.code, handle.handle_id)


def _adopt_migrated_snapshots(header: KeyedHeader, states: dict[str, StateMetadata], where: str,
                              registry: SnapshotRegistry | None) -> None:
    """A state migrated in the Parquet form records its new per-value snapshot in
    ``_metadata.json``; the kept header still has the old one. The new one goes inside Flink's
    List / Map / TTL wrappers, as the Flink rewriter does."""
    for i, m in enumerate(header.states):
        st = states.get(m.name)
        if st is None or m.is_timers:
            continue
        old, _ = m.value_snapshot_unwrapped()
        if old is None or not st.value_serializer or old.raw == st.value_serializer:
            continue
        new = snapshot_from_envelope(_ENVELOPE_VERSION + st.value_serializer, registry)
        header.states[i].set_serializer(VALUE_SERIALIZER, m.with_value_snapshot(new))


def _by_key_group(layout: StateLayout, table: pa.Table) -> Iterator[tuple[int, list[bytes], list[bytes]]]:
    """``(key group, composite keys, values)`` per key group, in stored row order; key groups must
    ascend (as a conversion writes them)."""
    if table.num_rows == 0:
        return
    batch = pa.RecordBatch.from_arrays([table.column(n).combine_chunks() for n in table.column_names],
                                       schema=table.schema)
    cur, keys, values = -1, list[bytes](), list[bytes]()
    for kg, k, v in entries_from_batch(layout, batch):
        if kg != cur:
            if kg < cur:
                raise SavepointError(f"{layout.where}: key group {kg} after {cur}: rows are not in key-group order")
            if keys:
                yield cur, keys, values
            cur, keys, values = kg, [], []
        keys.append(k)
        values.append(v)
    if keys:
        yield cur, keys, values


__all__ = ["ConvertReport", "convert_savepoint", "flink_to_parquet", "parquet_to_flink", "state_table_name"]
