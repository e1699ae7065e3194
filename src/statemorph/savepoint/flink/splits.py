"""Key-group ranges as units of parallel work, planned from ``_metadata`` alone.

Why: a keyed-state stream is a sequence of independently seekable key groups whose offsets
``_metadata`` records, so a reader can hand each task a key-group range and the task reads only
those bytes. Splitting by the recorded byte extents (not by key-group count) keeps tasks even when
the parallelism is low (one huge stream becomes many tasks) or when state is skewed (a heavy key
group gets a task of its own). No stream is opened to plan: sizes come from the handles. A RocksDB instance (native
savepoints, checkpoints) is cut by key-group count, sized by its files.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...errors import FlinkSavepointError
from .handles import ByteStreamHandle, FileHandle, KeyGroupsHandle, RelativeFileHandle
from .key_group_scan import KeyGroupPiece
from .keyed_blocks import key_group_extents
from .metadata import OperatorState
from .native_handles import IncrementalHandle


@dataclass(frozen=True)
class KeyGroupSplit:
    """One task's share: a key-group range of one subtask stream and its byte count. A key group
    stored in more than a task's share comes alone with ``cut``, the stored bytes of the pieces
    to cut it into (:func:`~.key_group_scan.key_group_pieces`, its cut run once, recording the
    hand-over where each run of its pieces begins); each piece is then a split of its own with ``piece`` set."""

    subtask: int
    key_groups: range
    bytes: int
    cut: int = 0
    piece: KeyGroupPiece | None = None

    def cut_into(self, pieces: list[KeyGroupPiece]) -> list[KeyGroupSplit]:
        """This split of one key group as one split per piece (each about an equal share)."""
        return [KeyGroupSplit(self.subtask, self.key_groups, self.bytes // len(pieces), 0, p) for p in pieces]


def _stream_size(handle: KeyGroupsHandle, where: str) -> int:
    d = handle.delegate
    if isinstance(d, ByteStreamHandle):
        return len(d.data)
    if isinstance(d, (FileHandle, RelativeFileHandle)):
        return d.size
    raise FlinkSavepointError(f"{where}: the keyed-state handle has no data stream")


def key_group_splits(op: OperatorState, tasks: int, *, task_bytes: int | None = None,
                     cut_above: int | None = None) -> list[KeyGroupSplit]:
    """About ``tasks`` key-group ranges (or ranges of about ``task_bytes`` stored bytes each)
    covering every non-empty key group of ``op``'s keyed streams, each inside one stream, cut so
    each holds about the same number of bytes. A range never splits a key group; with
    ``cut_above`` (the slice size of the scan) a key group stored in more than a range's share
    and more than ``cut_above`` bytes comes alone, marked to be cut (:attr:`KeyGroupSplit.cut`),
    so a stream of few large key groups still makes as many tasks as its bytes. Streams with no
    entries give no split."""
    if tasks < 1 or (task_bytes is not None and task_bytes < 1):
        raise ValueError(f"tasks and task_bytes must be at least 1, got {tasks} and {task_bytes}")
    per_stream = []
    natives = []
    for st in op.subtasks or []:
        if st.managed_native is not None and not st.finished:
            natives.append(st)
            continue
        h = st.managed_keyed
        if h is None or st.finished:
            continue
        where = f"{op.label()} subtask {st.index}"
        _, extents = key_group_extents(h, _stream_size(h, where), where)
        if extents:
            per_stream.append((st.index, h, extents))
    total = sum(e.end - e.offset for _, _, exts in per_stream for e in exts)
    total += sum(_instance_size(st.managed_native) for st in natives if st.managed_native is not None)
    if not total:
        return []
    target = task_bytes if task_bytes is not None else max(1, -(-total // tasks))
    cut = max(target, cut_above) if cut_above is not None else -1
    out: list[KeyGroupSplit] = []
    for st in natives:
        out.extend(_instance_splits(st.index, st.managed_native, target))
    for subtask, h, extents in per_stream:
        start = h.start_key_group
        size = 0
        for i, e in enumerate(extents):
            if 0 <= cut < e.end - e.offset:
                if size:
                    out.append(KeyGroupSplit(subtask, range(start, e.key_group), size))
                out.append(KeyGroupSplit(subtask, range(e.key_group, e.key_group + 1), e.end - e.offset, target))
                start, size = e.key_group + 1, 0
                continue
            size += e.end - e.offset
            last = i == len(extents) - 1
            if size >= target or last:
                stop = h.key_groups.stop if last else e.key_group + 1
                out.append(KeyGroupSplit(subtask, range(start, stop), size))
                start, size = stop, 0
    return out


__all__ = ["KeyGroupSplit", "key_group_splits"]


def _instance_size(h: IncrementalHandle | None) -> int:
    if h is None:
        return 0
    sizes = [f.handle.size if isinstance(f.handle, (FileHandle, RelativeFileHandle))
             else len(f.handle.data) if isinstance(f.handle, ByteStreamHandle) else 0 for f in h.files()]
    return sum(sizes)


def _instance_splits(subtask: int, h: IncrementalHandle | None, target: int) -> list[KeyGroupSplit]:
    """A RocksDB instance (native savepoints, checkpoints) records no per-key-group offsets: its
    range is cut into equal key-group counts, as many as its files' bytes make targets."""
    if h is None or not h.key_group_count:
        return []
    size = _instance_size(h)
    n = min(h.key_group_count, max(1, round(size / target)))
    r = h.key_groups
    bounds = [r.start + (len(r) * i) // n for i in range(n + 1)]
    return [KeyGroupSplit(subtask, range(a, b), size // n) for a, b in zip(bounds, bounds[1:], strict=False)]
