"""Writing one keyed-state stream: the header, then key groups in ascending order, each at an
offset recorded for ``_metadata``; the result becomes a file next to ``_metadata`` or, when small,
an inline handle. Used by the rewriter, and by anything that builds a stream from rows (see
:func:`entries_from_batch`, the inverse of the reader's batches)."""

from __future__ import annotations

from collections.abc import Iterator
from types import TracebackType

import pyarrow as pa

from ...bulk.chunks import PlacedInOrder
from ...errors import FlinkSavepointError
from ..storage import NewFile, Target
from .handles import ByteStreamHandle, FileHandle, KeyGroupsHandle, RelativeFileHandle, StreamHandle
from .keyed_blocks import StateRun, encode_key_group
from .keyed_header import KeyedHeader, write_keyed_header
from .layout import COL_KEY_BYTES, COL_VALUE_BYTES, StateLayout, build_composite_key

SAVEPOINT_KEY_GROUPS_HANDLE = 7


class KeyedStreamWriter:
    """Streams a keyed-state file into ``directory / name`` (a local directory, or a prefix of a
    remote filesystem: :class:`~statemorph.savepoint.storage.NewFile`); key groups must come in
    ascending order, each once, inside ``start_key_group .. start_key_group + key_groups - 1``."""

    def __init__(self, directory: Target, name: str, header: KeyedHeader, start_key_group: int,
                 key_groups: int) -> None:
        self.name = name
        self.compressed = header.compressed
        self.start = start_key_group
        self.offsets = [0] * key_groups
        head = write_keyed_header(header)
        self._f = NewFile(directory, name)
        self.path = self._f.label
        self._f.write(head)
        self.pos = len(head)
        self._last = -1

    def add_key_group(self, key_group: int, runs: list[StateRun]) -> None:
        if any(run.keys for run in runs):
            self.add_encoded_key_group(key_group, encode_key_group(runs, self.compressed))

    def add_encoded_key_group(self, key_group: int, data: bytes | bytearray | memoryview) -> None:
        """Append one key group already encoded (and Snappy-framed when the header says so) by
        :func:`encode_key_group`, e.g. by a parallel task. A large key group may come in
        consecutive pieces (its slices, see ``bulk_blocks.migrated_blocks``): a call for the key
        group just added appends to it."""
        self._place(key_group)
        self._f.write(data)
        self.pos += len(data)

    def placed(self) -> PlacedInOrder | None:
        """Where workers write their finished key groups themselves, at their places, in the
        order they are counted with :meth:`add_written_key_group`; None when the file is written
        front to back only (an object store): then :meth:`add_encoded_key_group`."""
        write_at = self._f.writer_at()
        return None if write_at is None else PlacedInOrder(write_at, self.pos)

    def add_written_key_group(self, key_group: int, n: int) -> None:
        """Count ``n`` bytes of ``key_group`` (or of its next piece) that a worker wrote through
        :meth:`placed`, in the order they were placed: what :meth:`add_encoded_key_group` does
        but the write."""
        self._place(key_group)
        self._f.advance(n)
        self.pos += n

    def _place(self, key_group: int) -> None:
        i = key_group - self.start
        if not 0 <= i < len(self.offsets) or key_group < self._last:
            raise FlinkSavepointError(
                f"{self.path}: key group {key_group} is out of order or outside "
                f"{self.start}..{self.start + len(self.offsets) - 1}"
            )
        if key_group != self._last:
            self.offsets[i] = self.pos
        self._last = key_group

    def finish(self, inline: bool, inline_name: str | None = None, code: int = SAVEPOINT_KEY_GROUPS_HANDLE,
               handle_id: str | None = None) -> KeyGroupsHandle:
        """Close the stream and return its handle; ``inline`` moves the bytes into ``_metadata``."""
        self._f.finish()
        data = b""
        if inline:
            data = self._f.read_back()
            self._f.remove()
        delegate: StreamHandle
        if inline:
            delegate = ByteStreamHandle(inline_name or self.name, data)
        else:
            delegate = RelativeFileHandle(self.name, self.pos)
        return KeyGroupsHandle(code, self.start, self.offsets, delegate, handle_id)

    def abort(self) -> None:
        self._f.abort()

    def __enter__(self) -> KeyedStreamWriter:
        return self

    def __exit__(self, t: type[BaseException] | None, v: BaseException | None, tb: TracebackType | None) -> None:
        if t is not None and not self._f.closed:
            self.abort()


def keep_inline(old: StreamHandle, size: int, threshold: int) -> bool:
    """Whether a rewritten stream goes into ``_metadata``. The source's choice is kept unless the
    size crosses the threshold (the job that wrote it may have used another one): an inline
    stream stays inline up to ``max(threshold, its old size)``, a file stays a file unless it
    shrank below both its old size and the threshold."""
    if isinstance(old, ByteStreamHandle):
        return size <= max(threshold, len(old.data))
    old_size = old.size if isinstance(old, (FileHandle, RelativeFileHandle)) else 0
    return size < min(threshold, old_size)


def entries_from_batch(layout: StateLayout, batch: pa.RecordBatch) -> Iterator[tuple[int, bytes, bytes]]:
    """``(key group, composite key, Flink value)`` from rows in the reader's column shape: the
    inverse of :meth:`FlinkSavepoint.iter_state_batches`. List rows of one key must be adjacent
    and in index order (as the reader yields them); map rows give one entry each."""
    cols = {name: batch.column(name).to_pylist() for name in batch.schema.names}
    n = batch.num_rows
    kind = layout.kind
    ttl = cols.get("ttl_timestamp")
    i = 0
    while i < n:
        if layout.whole_keys:
            kg = cols["key_group"][i]
            yield kg, layout.whole_key(kg, cols[COL_KEY_BYTES][i]), cols[COL_VALUE_BYTES][i]
            i += 1
            continue
        kg, key, ns = cols["key_group"][i], cols["key"][i], cols["namespace"][i]
        if kind == "timers":
            yield kg, layout.timer_key(kg, cols["timestamp"][i], key, ns), b""
            i += 1
            continue
        user_key = cols["user_key"][i] if kind == "map" else b""
        composite = build_composite_key(kg, key, ns, user_key, layout.prefix, layout.ambiguous)
        if layout.whole:
            yield kg, composite, cols[COL_VALUE_BYTES][i]
            i += 1
            continue
        if kind == "list":
            j = i
            parts = []
            while j < n and cols["key_group"][j] == kg and cols["key"][j] == key and cols["namespace"][j] == ns:
                if cols["index"][j] != j - i:
                    raise FlinkSavepointError(f"list rows of one key must be in index order (row {j})")
                parts.append((cols["value"][j], ttl[j] if ttl else None))
                j += 1
            yield kg, composite, layout.join_value(parts)
            i = j
            continue
        yield kg, composite, layout.join_value([(cols["value"][i], ttl[i] if ttl else None)])
        i += 1
