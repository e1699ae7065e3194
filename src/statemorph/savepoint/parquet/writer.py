"""Writing savepoints atomically, one state and one Arrow batch at a time.

``SavepointWriter`` is the one way a savepoint directory comes into existence, for the backends
and for bulk engines alike: batches stream into Parquet part files (with page checksums) inside a
:class:`~statemorph.savepoint.files.StagedDirectory` next to the target (the destination claimed
exclusively, a ``.<name>.statemorph-tmp-<pid>-<hex>`` directory, removed on failure and on SIGINT /
SIGTERM); on commit every file and directory is fsynced, the metadata (with row counts and sha256
checksums) is written last, and the temporary directory is renamed onto the final path. A crash at
any point leaves either no savepoint or a complete one at the final path, never a partial one; what
a ``kill -9`` leaves is removed by the next writer of that destination (or
:func:`remove_stale_temp_dirs`). A file-system failure (disk full, read-only, permission denied)
is one :class:`~statemorph.errors.OutputError` line naming the path, with nothing left behind.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ...errors import SavepointError, StatemorphError
from ...keyed.kinds import StateKind
from ...keyed.namespace import VoidNamespaceSerializer
from ...typeutils import TypeSerializer, TypeSerializerSnapshot, write_versioned_snapshot
from ..files import SafeFile, StagedDirectory, fsync_path, open_regular, output_error, remove_stale_temp_dirs
from ..storage import RemoteFile
from .format import (
    COL_KEY_GROUP,
    FLINK_KINDS,
    FORMAT_VERSION,
    METADATA_FILE,
    ExtraFile,
    FileEntry,
    SavepointMetadata,
    StateMetadata,
    check_relative_path,
)

SnapshotLike = TypeSerializer[Any] | TypeSerializerSnapshot | bytes
"""A serializer, its snapshot, or the snapshot's versioned bytes."""

PARQUET_OPTIONS: dict[str, Any] = {"compression": "zstd", "write_page_checksum": True}
"""How part files are written: zstd pages, each with its CRC (readers verify them)."""


@contextmanager
def writing(path: str | os.PathLike[str], doing: str = "write") -> Iterator[None]:
    """Turn a file-system failure while writing ``path`` into one OutputError line."""
    try:
        yield
    except StatemorphError:
        raise
    except OSError as e:
        raise output_error(e, path, doing) from e


def snapshot_bytes(value: SnapshotLike) -> bytes:
    """Versioned snapshot bytes from a serializer, a snapshot, or bytes (taken as given)."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, TypeSerializer):
        value = value.snapshot_configuration()
    if isinstance(value, TypeSerializerSnapshot):
        return write_versioned_snapshot(value)
    raise TypeError(f"expected a serializer, a snapshot or snapshot bytes, got {type(value).__name__}")


class StateWriter:
    """Streams one state's rows into Parquet part files. Get one from :meth:`SavepointWriter.add_state`."""

    def __init__(self, owner: SavepointWriter, meta: StateMetadata, rows_per_file: int) -> None:
        self._owner = owner
        self.meta = meta
        self.schema = meta.schema()
        self._rows_per_file = rows_per_file
        self._writer: pq.ParquetWriter | None = None
        self._current_rel = ""
        self._current_rows = 0
        self._closed = False

    @property
    def name(self) -> str:
        return self.meta.name

    def _conform(self, data: pa.Table | pa.RecordBatch) -> pa.Table:
        """Check the columns and cast (large_binary → binary, int64 → int32) to the state schema."""
        table = pa.Table.from_batches([data]) if isinstance(data, pa.RecordBatch) else data
        if not isinstance(table, pa.Table):
            raise TypeError(f"state {self.name!r}: expected a pyarrow Table or RecordBatch, got {type(data).__name__}")
        names = set(table.column_names)
        wanted = self.schema.names
        if names != set(wanted):
            raise SavepointError(
                f"state {self.name!r} ({self.meta.kind.value}): columns {sorted(names)} do not match "
                f"the savepoint schema {wanted}"
            )
        cols = []
        for f in self.schema:
            col = table.column(f.name)
            if not f.nullable and col.null_count:
                raise SavepointError(f"state {self.name!r}: column {f.name!r} has {col.null_count} nulls")
            if col.type != f.type:
                try:
                    col = col.cast(f.type)
                except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
                    raise SavepointError(f"state {self.name!r}: column {f.name!r} of type {col.type} "
                                         f"cannot be stored as {f.type}: {e}") from e
            cols.append(col)
        out = pa.Table.from_arrays(cols, schema=self.schema)
        if out.num_rows:
            mm = pc.min_max(out.column(COL_KEY_GROUP))
            lo, hi = mm["min"].as_py(), mm["max"].as_py()
            if lo < 0 or hi >= self._owner.max_parallelism:
                raise SavepointError(
                    f"state {self.name!r}: key groups {lo}..{hi} outside 0..{self._owner.max_parallelism - 1}"
                )
        return out

    def write(self, data: pa.Table | pa.RecordBatch) -> None:
        """Append rows (any batch size); they are split into part files of ``rows_per_file`` rows."""
        if self._closed:
            raise SavepointError(f"state {self.name!r}: the writer is closed")
        self._owner._check_open()
        table = self._conform(data)
        offset = 0
        while offset < table.num_rows:
            if self._writer is None:
                self._open_part()
            assert self._writer is not None
            take = min(self._rows_per_file - self._current_rows, table.num_rows - offset)
            with writing(self._owner._temp / self._current_rel):
                self._writer.write_table(table.slice(offset, take))
            self._current_rows += take
            offset += take
            if self._current_rows >= self._rows_per_file:
                self._close_part()

    def write_rows(self, rows: list[tuple[Any, ...]] | list[dict[str, Any]]) -> None:
        """Convenience: append Python rows, as tuples in schema column order or as dicts."""
        if not rows:
            return
        if isinstance(rows[0], dict):
            table = pa.Table.from_pylist(rows, schema=self.schema)  # type: ignore[arg-type]
        else:
            columns = list(zip(*rows, strict=True))
            if len(columns) != len(self.schema):
                raise SavepointError(f"state {self.name!r}: rows must have {len(self.schema)} fields "
                                     f"({self.schema.names})")
            table = pa.Table.from_arrays([pa.array(c, type=f.type) for c, f in zip(columns, self.schema,
                                                                                   strict=True)],
                                         schema=self.schema)
        self.write(table)

    def add_file(self, source: str | os.PathLike[str] | SafeFile, *, move: bool = False, rows: int | None = None,
                 sha256: str | None = None) -> FileEntry:
        """Add a finished Parquet file (e.g. copied from another savepoint or written by a Spark
        task) as this state's next part file, moved or copied, without rewriting it. Its schema
        must be the state schema; ``rows`` / ``sha256`` are taken from the file when not given.

        A path must be a regular file (a FIFO or device is refused, never read). A
        :class:`~statemorph.savepoint.files.SafeFile` (an open file of another savepoint) is
        copied in one streamed pass that also hashes it: a given ``sha256`` must be the file's
        (it is what readers verify), else nothing is added and the error names the source."""
        if self._closed:
            raise SavepointError(f"state {self.name!r}: the writer is closed")
        self._owner._check_open()
        if move and isinstance(source, SafeFile):
            raise ValueError("an open SafeFile is copied, not moved")
        src = source if isinstance(source, SafeFile) else open_regular(source, follow=True)
        try:
            if isinstance(source, SafeFile):
                entry = self._copy_verified(source, rows, sha256)
            else:
                with src.reader() as fobj:  # validate before touching anything: a rejected file is not lost
                    num_rows = self._check_parquet(fobj, src.label, rows)
                target = self._next_target()
                with writing(target):
                    if move:
                        os.replace(source, target)
                        fsync_path(target)
                        digest = sha256 if sha256 is not None else src.sha256()
                    else:
                        digest = src.copy_to(target)
                if sha256 is not None and digest != sha256:
                    target.unlink()
                    raise SavepointError(f"{src.label}: sha256 {digest} != {sha256} recorded for it (damaged)")
                entry = FileEntry(self._rel(target), num_rows, src.size, digest)
        finally:
            if src is not source:
                src.close()
        self.meta.files.append(entry)
        return entry

    def _rel(self, target: Path) -> str:
        return target.relative_to(self._owner._temp).as_posix()

    def _next_target(self) -> Path:
        """Close the open part file; the path of the next part file (its directory created)."""
        self._close_part()
        target = self._owner._temp / f"{self.meta.directory}/part-{len(self.meta.files):05d}.parquet"
        with writing(target):
            target.parent.mkdir(parents=True, exist_ok=True)
        return target

    def _copy_verified(self, src: SafeFile, rows: int | None, sha256: str | None) -> FileEntry:
        """One streamed pass: copy and hash; then the copy (ours now) is checked as Parquet."""
        target = self._next_target()
        try:
            with writing(target):
                digest = src.copy_to(target)
            if sha256 is not None and digest != sha256:
                raise SavepointError(f"{src.label}: sha256 {digest} != {sha256} recorded for it (damaged)")
            with open_regular(target, src.label) as copy, copy.reader() as fobj:
                num_rows = self._check_parquet(fobj, src.label, rows)
        except BaseException:
            target.unlink(missing_ok=True)
            raise
        return FileEntry(self._rel(target), num_rows, src.size, digest)

    def _check_parquet(self, fobj: Any, label: str, rows: int | None) -> int:
        try:
            pf = pq.ParquetFile(fobj)
            schema, num_rows = pf.schema_arrow, int(pf.metadata.num_rows)
        except (pa.ArrowException, OSError) as e:
            raise SavepointError(f"state {self.name!r}: {label} is not a readable Parquet file: {e}") from e
        if schema.names != self.schema.names or any(schema.field(f.name).type != f.type for f in self.schema):
            raise SavepointError(f"state {self.name!r}: {label} has columns {schema.names} / types that do not "
                                 f"match the {self.meta.kind.value} state schema")
        if rows is not None and rows != num_rows:
            raise SavepointError(f"state {self.name!r}: {label} has {num_rows} rows, not {rows}")
        return num_rows

    def _open_part(self) -> None:
        n = len(self.meta.files)
        self._current_rel = f"{self.meta.directory}/part-{n:05d}.parquet"
        full = self._owner._temp / self._current_rel
        with writing(full):
            full.parent.mkdir(parents=True, exist_ok=True)
            self._writer = pq.ParquetWriter(str(full), self.schema, **PARQUET_OPTIONS)
        self._current_rows = 0

    def _close_part(self) -> None:
        if self._writer is None:
            return
        full = self._owner._temp / self._current_rel
        with writing(full):
            writer, self._writer = self._writer, None
            writer.close()
            with open_regular(full) as f:
                os.fsync(f.fd)
                digest, size = f.sha256(), f.size
        self.meta.files.append(FileEntry(self._current_rel, self._current_rows, size, digest))
        self._current_rows = 0

    def close(self) -> None:
        if not self._closed:
            self._close_part()
            self._closed = True

    def _abort(self) -> None:
        if self._writer is not None:
            try:
                self._writer.close()
            finally:
                self._writer = None
        self._closed = True


class SavepointWriter:
    """Context manager that writes a savepoint directory atomically.

    ::

        with SavepointWriter(path, max_parallelism=128, key_serializer=StringSerializer()) as w:
            s = w.add_state("events", "value", value_serializer=row_ser)
            for batch in batches:            # pa.RecordBatch / pa.Table with the state's columns
                s.write(batch)
        # committed here; an exception inside the block removes everything written

    The final path must not exist; it is claimed for this writer until commit or abort (a second
    writer for it is a :class:`~statemorph.errors.DestinationBusyError`). ``source`` (the
    savepoint being rewritten) makes a path inside it a UsageError. Serializer arguments accept a
    serializer, its snapshot or the snapshot bytes (so bulk engines can copy them from another
    savepoint's metadata).
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        max_parallelism: int,
        key_serializer: SnapshotLike,
        rows_per_file: int = 1_000_000,
        properties: dict[str, str] | None = None,
        source: str | os.PathLike[str] | None = None,
    ) -> None:
        if not isinstance(max_parallelism, int) or not 0 < max_parallelism <= 1 << 15:
            raise ValueError(f"max_parallelism must be in 1..32768, got {max_parallelism!r}")
        if rows_per_file < 1:
            raise ValueError("rows_per_file must be positive")
        self.path = Path(path)
        self.max_parallelism = max_parallelism
        self._rows_per_file = rows_per_file
        self.metadata = SavepointMetadata(max_parallelism=max_parallelism,
                                          key_serializer=snapshot_bytes(key_serializer),
                                          properties=dict(properties or {}))
        self._writers: list[StateWriter] = []
        self._staged = StagedDirectory(self.path, source=source)
        self._temp = self._staged.temp
        self._state = "open"

    @property
    def temp_dir(self) -> Path:
        """Where files are written until commit (same parent as the final path)."""
        return self._temp

    def _check_open(self) -> None:
        if self._state != "open":
            raise SavepointError(f"savepoint writer for {self.path} is {self._state}")

    def add_state(
        self,
        name: str,
        kind: StateKind | str,
        *,
        value_serializer: SnapshotLike,
        namespace_serializer: SnapshotLike | None = None,
        user_key_serializer: SnapshotLike | None = None,
        key_serializer: SnapshotLike | None = None,
        operator: str | None = None,
        flink_kind: str | None = None,
        ttl: bool = False,
        whole_values: bool = False,
        whole_keys: bool = False,
    ) -> StateWriter:
        """Declare a state and return its writer. ``namespace_serializer`` defaults to
        ``VoidNamespaceSerializer``; ``key_serializer`` to the savepoint's key serializer.
        ``operator`` / ``flink_kind`` / ``ttl`` describe a state converted from Flink (format
        version 2: the rows then carry the TTL timestamp, or are timers; ``whole_values``: whole
        Flink entries, ``value_bytes``; ``whole_keys``: whole entries with their keys,
        ``key_bytes`` and ``value_bytes``)."""
        self._check_open()
        if not isinstance(name, str) or not name:
            raise ValueError(f"a state name must be a non-empty string, got {name!r}")
        if name in self.metadata.states:
            raise SavepointError(f"state {name!r} was already added to this savepoint")
        kind = StateKind(kind)
        if flink_kind is not None and flink_kind not in FLINK_KINDS:
            raise ValueError(f"state {name!r}: flink_kind must be one of {FLINK_KINDS}, got {flink_kind!r}")
        if (kind is StateKind.MAP) != (user_key_serializer is not None):
            raise ValueError(f"state {name!r}: a user key serializer is required for map state and only for it")
        if namespace_serializer is None:
            namespace_serializer = VoidNamespaceSerializer()
        meta = StateMetadata(
            name=name,
            kind=kind,
            directory=f"state-{len(self.metadata.states):05d}",
            key_serializer=snapshot_bytes(key_serializer) if key_serializer is not None
            else self.metadata.key_serializer,
            namespace_serializer=snapshot_bytes(namespace_serializer),
            value_serializer=snapshot_bytes(value_serializer),
            user_key_serializer=snapshot_bytes(user_key_serializer) if user_key_serializer is not None else None,
            operator=operator,
            flink_kind=flink_kind,
            ttl=ttl,
            whole_values=whole_values,
            whole_keys=whole_keys,
        )
        if operator is not None or flink_kind is not None or ttl or whole_values or whole_keys:
            self.metadata.format_version = FORMAT_VERSION
        self.metadata.states[name] = meta
        w = StateWriter(self, meta, self._rows_per_file)
        self._writers.append(w)
        return w

    def write_state(self, name: str, kind: StateKind | str, data: pa.Table | pa.RecordBatch | None = None,
                    **serializers: Any) -> StateMetadata:
        """Add a state and write one table for it in one call."""
        w = self.add_state(name, kind, **serializers)
        if data is not None:
            w.write(data)
        w.close()
        return w.meta

    def write_extra(self, rel: str, data: bytes | SafeFile | RemoteFile) -> ExtraFile:
        """Store a non-table file at ``rel`` (under ``flink/``), from bytes or copied from an open
        file of another savepoint, fsynced; returns its entry for :class:`FlinkExtras`."""
        self._check_open()
        check_relative_path(rel, "extra file")
        if not rel.startswith("flink/"):
            raise SavepointError(f"extra file {rel!r} must live under flink/")
        target = self._temp / rel
        with writing(target):
            target.parent.mkdir(parents=True, exist_ok=True)
            if not isinstance(data, bytes):
                digest = data.copy_to(target)
                size = data.size
            else:
                with open(target, "xb") as f:
                    f.write(data)
                    f.flush()
                    os.fsync(f.fileno())
                digest, size = hashlib.sha256(data).hexdigest(), len(data)
        self.metadata.format_version = FORMAT_VERSION
        return ExtraFile(rel, size, digest)

    def commit(self) -> Path:
        """Close all part files, write metadata, fsync, and rename into place."""
        self._check_open()
        try:
            for w in self._writers:
                w.close()
            meta_path = self._temp / METADATA_FILE
            with writing(meta_path), open(meta_path, "xb") as f:
                f.write(self.metadata.dumps())
                f.flush()
                os.fsync(f.fileno())
            self._staged.commit()
        except BaseException as e:
            self.abort(e)
            raise
        self._state = "committed"
        return self.path

    def abort(self, exc: BaseException | None = None) -> None:
        """Discard everything written and release the destination; the final path is never
        touched. ``exc`` is the error that caused the abort (a signal is re-delivered after it)."""
        if self._state == "committed":
            return
        for w in self._writers:
            try:
                w._abort()
            except Exception:  # noqa: BLE001 - best effort while already failing
                pass
        self._state = "aborted"
        self._staged.abort(exc)

    def __enter__(self) -> SavepointWriter:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if exc_type is None:
            if self._state == "open":
                self.commit()
        else:
            self.abort(exc)


__all__ = ["PARQUET_OPTIONS", "SavepointWriter", "SnapshotLike", "StateWriter", "remove_stale_temp_dirs",
           "snapshot_bytes", "writing"]
