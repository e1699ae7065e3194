"""Reading savepoints: metadata, verified files, and one state's rows as Arrow batches.

Nothing here writes: a savepoint is read-only input (restoring never changes it). Files are opened
only through :class:`~statemorph.savepoint.files.SavepointDir` (regular files inside the
savepoint, real size equal to the recorded one, checked before any read), each file's sha256 is
streamed and compared with the metadata before its rows are used, and Parquet then reads the same
open file (so a file renamed over it in between is not what gets read) with its page checksums
verified. The rows actually read are counted against the recorded count.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ...errors import NotASavepointError, SavepointError, StatemorphError
from ...keyed.keygroups import KeyGroupRange, KeyHasher, assign_to_key_group, hasher_for_serializer
from ...typeutils import SnapshotRegistry, TypeSerializer
from ..files import SafeFile, SavepointDir, SeenFiles
from .format import (
    COL_KEY_GROUP,
    MAX_METADATA_BYTES,
    METADATA_FILE,
    FileEntry,
    SavepointMetadata,
    StateMetadata,
    parse_metadata,
)

SavepointPath = str | os.PathLike[str] | SavepointDir
"""A savepoint directory, by path or already opened as a :class:`SavepointDir`."""


def _root(path: SavepointPath) -> SavepointDir:
    return path if isinstance(path, SavepointDir) else SavepointDir(path)


def read_metadata(path: SavepointPath) -> SavepointMetadata:
    """Parse ``<path>/_metadata.json``. A missing, oversized or invalid file is a SavepointError."""
    root = _root(path)
    label = root.path / METADATA_FILE
    if not os.path.lexists(label):
        if not os.path.lexists(root.path / "_metadata"):
            raise NotASavepointError.at(root.path)
        raise SavepointError(f"{label} is missing: {root.path} is not a complete savepoint")
    return parse_metadata(root.read_small(METADATA_FILE, MAX_METADATA_BYTES), str(label))


def _state_meta(meta: SavepointMetadata, state: str | StateMetadata) -> StateMetadata:
    return state if isinstance(state, StateMetadata) else meta.state(state)


def open_verified(root: SavepointDir, entry: FileEntry, seen: SeenFiles | None = None) -> SafeFile:
    """Open one listed file safely and check its size and (streamed) sha256 against the metadata."""
    f = root.open(entry.path, size=entry.size, recorded_in=METADATA_FILE)
    try:
        if seen is not None:
            seen.add(f)
        f.verify_sha256(entry.sha256, METADATA_FILE)
    except BaseException:
        f.close()
        raise
    return f


def _open_parquet(f: SafeFile, fobj: Any, entry: FileEntry, state: StateMetadata) -> pq.ParquetFile:
    """Parquet over the open file ``fobj`` (from ``f.reader()``), page checksums verified on read;
    schema, footer row count and the row groups' counts checked against the metadata."""
    try:
        pf = pq.ParquetFile(fobj, page_checksum_verification=True)
    except (pa.ArrowException, OSError) as e:
        raise SavepointError(f"{f.label}: not a readable Parquet file: {e}") from e
    schema = pf.schema_arrow
    expected = state.schema()
    if schema.names != expected.names or any(
        schema.field(n).type != expected.field(n).type for n in expected.names
    ):
        raise SavepointError(f"{f.label}: columns {schema} do not match the {state.kind.value} state schema {expected}")
    if pf.metadata.num_rows != entry.rows:
        raise SavepointError(f"{f.label}: {pf.metadata.num_rows} rows != {entry.rows} recorded in {METADATA_FILE}")
    groups = sum(pf.metadata.row_group(i).num_rows for i in range(pf.metadata.num_row_groups))
    if groups != entry.rows:
        raise SavepointError(f"{f.label}: its row groups hold {groups} rows, not the {entry.rows} recorded in "
                             f"{METADATA_FILE} (row-count mismatch)")
    return pf


def state_files(path: SavepointPath, state: str | StateMetadata, *, verify: bool = True,
                metadata: SavepointMetadata | None = None) -> list[Path]:
    """Absolute paths of one state's Parquet files, in order. With ``verify`` each file's size and
    sha256 are checked first (for engines such as Spark that read the files themselves)."""
    root = _root(path)
    meta = metadata or read_metadata(root)
    st = _state_meta(meta, state)
    out = []
    seen = SeenFiles()
    for entry in st.files:
        if verify:
            open_verified(root, entry, seen).close()
        else:
            root.resolve(entry.path)
        out.append(root.path / entry.path)
    return out


def iter_state_batches(
    path: SavepointPath,
    state: str | StateMetadata,
    *,
    key_group_range: KeyGroupRange | tuple[int, int] | None = None,
    batch_size: int = 65536,
    metadata: SavepointMetadata | None = None,
) -> Iterator[pa.RecordBatch]:
    """Stream one state's rows (verified), optionally only the rows of a key group range."""
    root = _root(path)
    meta = metadata or read_metadata(root)
    st = _state_meta(meta, state)
    kg = KeyGroupRange.of(key_group_range, meta.max_parallelism) if key_group_range is not None else None
    seen = SeenFiles()
    for entry in st.files:
        with open_verified(root, entry, seen) as sf:
            yield from _file_batches(sf, entry, st, meta.max_parallelism, kg, batch_size)


def _file_batches(sf: SafeFile, entry: FileEntry, st: StateMetadata, max_parallelism: int,
                  kg: KeyGroupRange | None, batch_size: int) -> Iterator[pa.RecordBatch]:
    label = sf.label
    read = 0
    with sf.reader() as fobj:
        pf = _open_parquet(sf, fobj, entry, st)
        try:
            for batch in pf.iter_batches(batch_size=batch_size):
                read += batch.num_rows
                for f in st.schema():
                    if not f.nullable and batch.column(f.name).null_count:
                        raise SavepointError(f"{label}: column {f.name!r} has "
                                             f"{batch.column(f.name).null_count} nulls")
                batch = batch.cast(st.schema()) if batch.schema != st.schema() else batch
                groups = batch.column(COL_KEY_GROUP)
                if batch.num_rows:
                    mm = pc.min_max(groups)
                    lo, hi = mm["min"].as_py(), mm["max"].as_py()
                    if lo is None or lo < 0 or hi >= max_parallelism:
                        raise SavepointError(f"{label}: key group out of range 0.."
                                             f"{max_parallelism - 1} (min {lo}, max {hi})")
                if kg is not None:
                    mask = pc.and_(pc.greater_equal(groups, kg.start), pc.less_equal(groups, kg.end))
                    batch = batch.filter(mask)
                yield batch
        except (pa.ArrowException, OSError) as e:
            raise SavepointError(f"{label}: cannot be read: {e}") from e
    if read != entry.rows:
        raise SavepointError(f"{label}: {read} rows read != {entry.rows} recorded in {METADATA_FILE} "
                             f"(row groups disagree with the footer)")


def read_state_table(
    path: SavepointPath,
    state: str | StateMetadata,
    *,
    key_group_range: KeyGroupRange | tuple[int, int] | None = None,
    metadata: SavepointMetadata | None = None,
) -> pa.Table:
    """One state's rows as a single Arrow table (verified)."""
    root = _root(path)
    meta = metadata or read_metadata(root)
    st = _state_meta(meta, state)
    batches = list(iter_state_batches(root, st, key_group_range=key_group_range, metadata=meta))
    return pa.Table.from_batches(batches, schema=st.schema())


def verify_savepoint(path: SavepointPath) -> SavepointMetadata:
    """Check the metadata and every listed file (size, sha256, Parquet schema, row count)."""
    root = _root(path)
    meta = read_metadata(root)
    seen = SeenFiles()
    for st in meta.states.values():
        for entry in st.files:
            with open_verified(root, entry, seen) as sf, sf.reader() as fobj:
                _open_parquet(sf, fobj, entry, st)
    return meta


def verify_key_groups(
    path: SavepointPath,
    *,
    key_serializer: TypeSerializer[Any] | None = None,
    key_hasher: KeyHasher | None = None,
    states: Iterable[str] | None = None,
    registry: SnapshotRegistry | None = None,
) -> int:
    """Check that every row's ``key_group`` is the group Flink assigns to its key (a row filed
    under the wrong group is invisible after restore). Reads the data; returns the number of rows
    checked; the first mismatch is a SavepointError naming the state, row, key and both groups.
    ``key_serializer`` defaults to the one restored from the savepoint; ``key_hasher`` to the Java
    hashCode for that serializer's type."""
    meta = read_metadata(path)
    ser = key_serializer if key_serializer is not None else meta.key_snapshot(registry).restore_serializer()
    hasher = key_hasher or hasher_for_serializer(ser)
    names = list(states) if states is not None else list(meta.states)
    checked = 0
    for name in names:
        st = meta.state(name)
        cache: dict[bytes, int] = {}
        row = 0
        for batch in iter_state_batches(path, st, metadata=meta):
            groups = batch.column("key_group").to_pylist()
            for kg, kb in zip(groups, batch.column("key").to_pylist(), strict=True):
                expected = cache.get(kb)
                if expected is None:
                    try:
                        key = ser.from_bytes(kb)
                        expected = assign_to_key_group(hasher(key), meta.max_parallelism)
                    except StatemorphError as e:
                        raise SavepointError(f"state {name!r}, row {row}: key 0x{kb.hex()} cannot be read or "
                                             f"hashed: {e}") from e
                    if len(cache) < 1 << 16:
                        cache[kb] = expected
                if kg != expected:
                    raise SavepointError(f"state {name!r}, row {row}: key {ser.from_bytes(kb)!r} is stored under "
                                         f"key group {kg} but belongs to key group {expected}")
                row += 1
        checked += row
    return checked


__all__ = ["iter_state_batches", "open_verified", "read_metadata", "read_state_table", "state_files",
           "verify_key_groups", "verify_savepoint"]
