"""Reading savepoints: metadata, verified files, and one state's rows as Arrow batches.

Nothing here writes: a savepoint is read-only input (restoring never changes it). Every file is
checked against the sha256 and row count recorded in the metadata before its rows are used, and
its bytes are parsed from the same buffer that was hashed, so what is verified is what is read.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ...errors import SavepointError, SavepointNotFoundError, StatemorphError
from ...keyed.keygroups import KeyGroupRange, KeyHasher, assign_to_key_group, hasher_for_serializer
from ...serializers.base import TypeSerializer
from ...snapshot import SnapshotRegistry
from .format import (
    COL_KEY_GROUP,
    MAX_METADATA_BYTES,
    METADATA_FILE,
    FileEntry,
    SavepointMetadata,
    StateMetadata,
    parse_metadata,
)


def _root(path: str | os.PathLike[str]) -> Path:
    root = Path(path)
    if not root.is_dir():
        raise SavepointNotFoundError(f"savepoint {root} does not exist or is not a directory")
    return root


def read_metadata(path: str | os.PathLike[str]) -> SavepointMetadata:
    """Parse ``<path>/_metadata.json``. A missing, oversized or invalid file is a SavepointError."""
    root = _root(path)
    meta_path = root / METADATA_FILE
    try:
        size = meta_path.stat().st_size
        if size > MAX_METADATA_BYTES:
            raise SavepointError(f"{meta_path}: {size} bytes exceeds the {MAX_METADATA_BYTES}-byte limit")
        data = meta_path.read_bytes()
    except FileNotFoundError:
        raise SavepointError(f"{meta_path} is missing: {root} is not a complete savepoint") from None
    except OSError as e:
        raise SavepointError(f"{meta_path} cannot be read: {e}") from e
    return parse_metadata(data, str(meta_path))


def _state_meta(meta: SavepointMetadata, state: str | StateMetadata) -> StateMetadata:
    return state if isinstance(state, StateMetadata) else meta.state(state)


def _read_verified(root: Path, entry: FileEntry) -> bytes:
    full = root / entry.path
    try:
        with open(full, "rb") as f:
            data = f.read(entry.size + 1)
    except FileNotFoundError:
        raise SavepointError(f"{full}: file listed in {METADATA_FILE} is missing") from None
    except OSError as e:
        raise SavepointError(f"{full}: cannot be read: {e}") from e
    if len(data) != entry.size:
        raise SavepointError(f"{full}: size {len(data) if len(data) <= entry.size else 'larger than'} "
                             f"!= {entry.size} recorded in {METADATA_FILE} (truncated or replaced)")
    digest = hashlib.sha256(data).hexdigest()
    if digest != entry.sha256:
        raise SavepointError(f"{full}: sha256 {digest} != {entry.sha256} recorded in {METADATA_FILE} (damaged)")
    return data


def _open_parquet(root: Path, entry: FileEntry, data: bytes, state: StateMetadata) -> pq.ParquetFile:
    full = root / entry.path
    try:
        pf = pq.ParquetFile(pa.BufferReader(data))
    except (pa.ArrowException, OSError) as e:
        raise SavepointError(f"{full}: not a readable Parquet file: {e}") from e
    schema = pf.schema_arrow
    expected = state.schema()
    if schema.names != expected.names or any(
        schema.field(n).type != expected.field(n).type for n in expected.names
    ):
        raise SavepointError(f"{full}: columns {schema} do not match the {state.kind.value} state schema {expected}")
    if pf.metadata.num_rows != entry.rows:
        raise SavepointError(f"{full}: {pf.metadata.num_rows} rows != {entry.rows} recorded in {METADATA_FILE}")
    return pf


def state_files(path: str | os.PathLike[str], state: str | StateMetadata, *, verify: bool = True,
                metadata: SavepointMetadata | None = None) -> list[Path]:
    """Absolute paths of one state's Parquet files, in order. With ``verify`` each file's size and
    sha256 are checked first (for engines such as Spark that read the files themselves)."""
    root = _root(path)
    meta = metadata or read_metadata(root)
    st = _state_meta(meta, state)
    out = []
    for entry in st.files:
        if verify:
            _read_verified(root, entry)
        out.append(root / entry.path)
    return out


def iter_state_batches(
    path: str | os.PathLike[str],
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
    for entry in st.files:
        data = _read_verified(root, entry)
        pf = _open_parquet(root, entry, data, st)
        try:
            for batch in pf.iter_batches(batch_size=batch_size):
                for f in st.schema():
                    if not f.nullable and batch.column(f.name).null_count:
                        raise SavepointError(f"{root / entry.path}: column {f.name!r} has "
                                             f"{batch.column(f.name).null_count} nulls")
                batch = batch.cast(st.schema()) if batch.schema != st.schema() else batch
                groups = batch.column(COL_KEY_GROUP)
                if batch.num_rows:
                    mm = pc.min_max(groups)
                    lo, hi = mm["min"].as_py(), mm["max"].as_py()
                    if lo is None or lo < 0 or hi >= meta.max_parallelism:
                        raise SavepointError(f"{root / entry.path}: key group out of range 0.."
                                             f"{meta.max_parallelism - 1} (min {lo}, max {hi})")
                if kg is not None:
                    mask = pc.and_(pc.greater_equal(groups, kg.start), pc.less_equal(groups, kg.end))
                    batch = batch.filter(mask)
                yield batch
        except (pa.ArrowException, OSError) as e:
            raise SavepointError(f"{root / entry.path}: cannot be read: {e}") from e


def read_state_table(
    path: str | os.PathLike[str],
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


def verify_savepoint(path: str | os.PathLike[str]) -> SavepointMetadata:
    """Check the metadata and every listed file (size, sha256, Parquet schema, row count)."""
    root = _root(path)
    meta = read_metadata(root)
    for st in meta.states.values():
        for entry in st.files:
            _open_parquet(root, entry, _read_verified(root, entry), st)
    return meta


def verify_key_groups(
    path: str | os.PathLike[str],
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


__all__ = ["iter_state_batches", "read_metadata", "read_state_table", "state_files", "verify_key_groups",
           "verify_savepoint"]
