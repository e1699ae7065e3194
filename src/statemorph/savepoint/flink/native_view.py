"""A native savepoint or retained checkpoint seen as a canonical one, so that every reader of
canonical savepoints (``inspect``, the state tables of ``read_state`` and the engines, the
operator descriptions the planner and ``schema`` use) reads it unchanged.

:class:`NativeFlinkSavepoint` is a :class:`~.reader.FlinkSavepoint` whose keyed streams come
from RocksDB instances: each key group's entries, read column family by column family
(:meth:`.native.RocksInstance.key_groups`), are laid out as the canonical key-group block they
would be in a canonical savepoint and scanned by the same kernel as a file's
(:func:`.key_group_scan.scanned_groups`). One key group is held at a time. A state's table
takes its column family's runs as they come (:meth:`RocksKeyedStream.state_runs`): laying them
out and scanning them back would give the same runs at three times the cost. Operator-state and
full key-group streams (the hashmap backend's) are opened through the checkpoint's containment
rule (:class:`NativeDirectory`).
"""

from __future__ import annotations

import os
from array import array
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path

from ...typeutils import SnapshotRegistry
from .files import InlineStream, SavepointDirectory
from .handles import SAVEPOINT_KEY_GROUPS_HANDLE, FileHandle, KeyGroupsHandle, RelativeFileHandle
from .key_group_scan import ScannedGroup, scanned_groups
from .keyed_blocks import KeyGroupExtent, StateRun, encode_key_group
from .keyed_header import KeyedHeader, write_keyed_header
from .metadata import OperatorState, SubtaskState
from .native import NativeSavepoint, RocksInstance, refuse_hashmap_format
from .native_handles import IncrementalHandle
from .reader import FlinkSavepoint, KeyedStream

WHOLE = 1 << 62
"""A slice size no key group reaches: whole key groups."""


class NativeDirectory(SavepointDirectory):
    """The directory a native savepoint's or checkpoint's files are opened in (the job directory
    of a checkpoint), each file named by the checkpoint's containment rule."""

    def __init__(self, native: NativeSavepoint) -> None:
        self.files = native.files
        self.path = native.path
        self.native = native

    def relative_name(self, handle: FileHandle | RelativeFileHandle) -> str:
        return self.native.namer(handle, str(self.path))


class RocksKeyedStream(KeyedStream):
    """One subtask's RocksDB instance as a canonical keyed-state stream: the header of its meta
    data, and key groups laid out and scanned as a canonical stream's. The instance is opened by
    ``open`` when its entries are first read, not before: describing an operator (the planner,
    ``schema``) reads the header only, so a migration opens each instance once, to write it."""

    def __init__(self, open: Callable[[], RocksInstance], header: KeyedHeader, handle: IncrementalHandle,
                 where: str) -> None:
        head = write_keyed_header(header)
        n = handle.key_group_count
        self._open = open
        self._instance: RocksInstance | None = None
        self.source = InlineStream(head, f"{where} meta data")
        self.handle = KeyGroupsHandle(SAVEPOINT_KEY_GROUPS_HANDLE, handle.start_key_group,
                                      array("q", [0] * n), None)
        self.where = where
        self.extents = []
        self.header_end = len(head)
        self.header = header

    @property
    def instance(self) -> RocksInstance:
        """The RocksDB instance, opened on first use (closed by :meth:`close`)."""
        if self._instance is None:
            self._instance = self._open()
        return self._instance

    def key_groups(self, only: range | None = None) -> Iterator[tuple[int, list[StateRun]]]:
        """Whole key groups, as :meth:`KeyedStream.key_groups` promises (the per-entry paths)."""
        return self.instance.key_groups(only, slice_bytes=WHOLE)

    def scanned(self, only: range | None = None, states: set[int] | None = None) -> Iterator[ScannedGroup]:
        """Key groups a slice at a time (a large one as consecutive slices of the same group), of
        the column families of ``states`` only when given."""
        n = len(self.header.states)
        for kg, runs in self.instance.key_groups(only, states=states):
            data = encode_key_group(runs, False)
            yield from scanned_groups(InlineStream(data, self.where), [KeyGroupExtent(kg, 0, len(data))], False, n,
                                      self.where)

    def state_runs(self, only: range | None, state_id: int) -> Iterator[StateRun]:
        """The runs of the instance's column family as they come from RocksDB: laid out as a
        canonical block and scanned back (:meth:`scanned`) they would be the same keys and values,
        at three times the cost (the benchmark in ``benchmarks/test_native_read.py``)."""
        return self.instance.state_runs(state_id, only)

    def close(self) -> None:
        if self._instance is not None:
            self._instance.close()
            self._instance = None


class NativeFlinkSavepoint(FlinkSavepoint):
    """A native savepoint, or a retained checkpoint's ``chk-N`` directory, read as a canonical
    savepoint (see the module docstring); ``format`` says which
    (:func:`statemorph.engine.flink_native.inspect_native` adds each subtask's files)."""

    def __init__(self, path: str | os.PathLike[str], registry: SnapshotRegistry | None = None) -> None:
        self.native = NativeSavepoint(path, registry)
        self.directory = NativeDirectory(self.native)
        self.path: Path | str = self.native.path
        self.registry = registry
        self.metadata = self.native.metadata

    @property
    def format(self) -> str:
        return self.native.format

    def keyed_streams(self, op: OperatorState) -> Iterator[tuple[SubtaskState, KeyedStream]]:
        for st in op.subtasks or []:
            h = st.managed_native
            if h is None:
                if st.managed_keyed is not None:
                    for _, stream in super().keyed_streams(_alone(op, st)):
                        if self.native.checkpoint:
                            refuse_hashmap_format(stream.source, stream.extents, stream.where)
                        yield st, stream
                continue
            header = self.native.header(op, st, h)
            with RocksKeyedStream(partial(self.native.open_instance, op, st, h, header), header, h,
                                  f"{self.path}: {op.label()} subtask {st.index}") as stream:
                yield st, stream


def _alone(op: OperatorState, st: SubtaskState) -> OperatorState:
    """``op`` with only subtask ``st``: the canonical reader opens that one stream."""
    return OperatorState(op.operator_id, op.parallelism, op.max_parallelism, op.coordinator, [st], op.name, op.uid)

