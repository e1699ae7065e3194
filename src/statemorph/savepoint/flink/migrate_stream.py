"""Migrating the values of one keyed-state stream: the new header, and the key groups with the
changed states' values passed through the caller's migration in batches.

These are the pieces a runner composes: the local rewriter writes every key group of a stream
in one pass; a parallel runner (Spark) gives each task a key-group range (``key_groups``),
encodes each migrated group with :func:`encode_key_group`, and appends the blocks in key-group
order with :meth:`KeyedStreamWriter.add_encoded_key_group`. Migrations see per-value bytes (no
TTL timestamp, no map null flag, one list element each) and never keys.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import Executor
from typing import Any

import pyarrow as pa

from ...bulk.chunks import PlacedInOrder
from ...errors import FlinkSavepointError, StatemorphError
from ...typeutils import SnapshotRegistry
from .bulk_blocks import BULK_KINDS, migrated_blocks
from .envelope import snapshot_from_envelope
from .key_group_scan import KeyGroupPiece
from .keyed_blocks import StateRun, encode_key_group
from .keyed_header import VALUE_SERIALIZER, KeyedHeader
from .layout import StateLayout
from .reader import KeyedStream

ValueMigration = Callable[[pa.BinaryArray], pa.Array]
DEFAULT_BATCH_VALUES = 1 << 16


def migrated_header(
    header: KeyedHeader, new_value_snapshots: Mapping[str, bytes], registry: SnapshotRegistry | None = None
) -> KeyedHeader:
    """A copy of ``header`` whose named states carry new per-value serializer snapshots (given
    as top-level envelopes), placed inside their List / Map / TTL wrappers."""
    out = copy.deepcopy(header)
    for name, envelope in new_value_snapshots.items():
        sid, meta = header.state(name)
        new = meta.with_value_snapshot(snapshot_from_envelope(envelope, registry))
        out.states[sid].set_serializer(VALUE_SERIALIZER, new)
    return out


def migrated_key_groups(stream: KeyedStream, migrations: Mapping[str, ValueMigration], max_parallelism: int, *,
                        key_groups: range | None = None, batch_values: int = DEFAULT_BATCH_VALUES,
                        counts: dict[str, int] | None = None) -> Iterator[tuple[int, list[StateRun]]]:
    """Every non-empty key group of ``stream`` (of ``key_groups`` when given) with the values of
    the states in ``migrations`` migrated; ``counts`` receives the number of values per state."""
    layouts: dict[int, tuple[StateLayout, ValueMigration, str]] = {}
    for name, fn in migrations.items():
        sid, meta = stream.header.state(name)
        where = f"{stream.where} state {name!r}"
        layouts[sid] = (StateLayout(meta, stream.header.key_serializer, max_parallelism, where), fn, where)
    if counts is not None:
        for name in migrations:
            counts.setdefault(name, 0)
    pending = _Pending(layouts)
    for kg, runs in stream.key_groups(key_groups):
        pending.add(kg, runs)
        if pending.count >= batch_values:
            yield from pending.flush(counts, stream.header)
    yield from pending.flush(counts, stream.header)


def migrated_encoded_key_groups(stream: KeyedStream, migrations: Mapping[str, ValueMigration],
                                max_parallelism: int, *, key_groups: range | None = None,
                                batch_values: int = DEFAULT_BATCH_VALUES, counts: dict[str, int] | None = None,
                                workers: int = 1, slice_bytes: int | None = None,
                                placed: PlacedInOrder | None = None,
                                piece: KeyGroupPiece | None = None,
                                pool: Executor | None = None) -> Iterator[tuple[int, Any]]:
    """:func:`migrated_key_groups`, each key group encoded as
    :meth:`KeyedStreamWriter.add_encoded_key_group` takes it (a bytes-like buffer, Snappy-framed
    when the stream is compressed): the same bytes as :func:`encode_key_group` of its runs. The
    key groups never become Python objects per entry: the block kernels scan them, split list
    values into elements, and rebuild them around the bulk migration (value, reducing,
    aggregating, list and map state; TTL timestamps and map null flags kept), on ``workers``
    threads (:func:`.bulk_blocks.migrated_blocks`, which ``slice_bytes``, ``piece`` and a shared
    ``pool`` go to).
    With ``placed`` the bytes are written at their places in the file as they are made, and each
    key group comes with its number of bytes instead (:meth:`KeyedStreamWriter.placed`)."""
    metas = {name: stream.header.state(name) for name in migrations}
    layouts = {name: StateLayout(meta, stream.header.key_serializer, max_parallelism,
                                 f"{stream.where} state {name!r}") for name, (_, meta) in metas.items()}
    if not all(layout.kind in BULK_KINDS for layout in layouts.values()):  # refused there, with its reason
        if piece is not None:
            raise FlinkSavepointError(f"{stream.where}: only the block path migrates a piece of a key group")
        for seq, (kg, runs) in enumerate(migrated_key_groups(stream, migrations, max_parallelism,
                                                             key_groups=key_groups, batch_values=batch_values,
                                                             counts=counts)):
            data = encode_key_group(runs, stream.header.compressed)
            if placed is None:
                yield kg, data
            else:
                placed.put(seq, [data])
                yield kg, len(data)
        return

    def checked(fn: ValueMigration, where: str) -> ValueMigration:
        return lambda arr: _migrate_array(fn, where, arr)

    states = {sid: (layouts[name], checked(migrations[name], layouts[name].where))
              for name, (sid, _) in metas.items()}
    migrated: dict[int, int] = {}
    yield from migrated_blocks(stream, states, batch_values=batch_values, key_groups=key_groups, migrated=migrated,
                               workers=workers, slice_bytes=slice_bytes, placed=placed, piece=piece, pool=pool)
    if counts is not None:
        for name, (sid, _) in metas.items():
            counts[name] = counts.get(name, 0) + migrated.get(sid, 0)


class _Pending:
    """Key groups waiting for their changed values to be migrated in one batch."""

    def __init__(self, layouts: dict[int, tuple[StateLayout, ValueMigration, str]]) -> None:
        self.layouts = layouts
        self.groups: list[tuple[int, list[StateRun], dict[int, tuple[int, Callable[[list[bytes]], list[bytes]]]]]] = []
        self.values: dict[int, list[bytes]] = {sid: [] for sid in layouts}
        self.count = 0

    def add(self, kg: int, runs: list[StateRun]) -> None:
        split: dict[int, tuple[int, Callable[[list[bytes]], list[bytes]]]] = {}
        for run in runs:
            entry = self.layouts.get(run.state_id)
            if entry is None:
                continue
            users, rebuild = entry[0].value_parts(run.values)
            self.values[run.state_id].extend(users)
            self.count += len(users)
            split[run.state_id] = (len(users), rebuild)
        self.groups.append((kg, runs, split))

    def flush(self, counts: dict[str, int] | None, header: KeyedHeader) -> Iterator[tuple[int, list[StateRun]]]:
        new_values = {}
        for sid, vals in self.values.items():
            _, fn, where = self.layouts[sid]
            new_values[sid] = _migrate(fn, where, vals)
            if counts is not None:
                counts[header.states[sid].name] += len(vals)
        used = dict.fromkeys(new_values, 0)
        groups = self.groups
        self.groups = []
        for vals in self.values.values():
            vals.clear()
        self.count = 0
        for kg, runs, split in groups:
            out_runs = []
            for run in runs:
                if run.state_id not in split:
                    out_runs.append(run)
                    continue
                n, rebuild = split[run.state_id]
                at = used[run.state_id]
                used[run.state_id] = at + n
                out_runs.append(StateRun(run.state_id, run.keys, rebuild(new_values[run.state_id][at : at + n])))
            yield kg, out_runs


def _migrate(fn: ValueMigration, where: str, values: list[bytes]) -> list[bytes]:
    if not values:
        return []
    result: list[bytes] = _migrate_array(fn, where, pa.array(values, pa.binary())).to_pylist()
    return result


def _migrate_array(fn: ValueMigration, where: str, arr: pa.Array) -> pa.Array:
    """``fn(arr)``, checked: as many values as ``arr``, none null; other errors become typed."""
    try:
        out = fn(arr)
    except StatemorphError:
        raise
    except Exception as e:
        raise FlinkSavepointError(f"{where}: the value migration failed: {e}") from e
    if not isinstance(out, (pa.Array, pa.ChunkedArray)) or len(out) != len(arr):
        got = len(out) if hasattr(out, "__len__") else type(out).__name__
        raise FlinkSavepointError(f"{where}: the value migration returned {got} values for {len(arr)}")
    if out.null_count:
        raise FlinkSavepointError(f"{where}: the value migration returned nulls")
    return out
