"""Real Flink savepoints (tests/data/flink_savepoints) whose ``_metadata`` says one hostile thing:
a handle used twice, a path leaving the directory, a key-group range past max parallelism. The
CLI tests (tests/savepoint/test_flink_trust.py) and the fuzz families ``handle-reuse`` and
``containment`` (tests/fuzz/families.py) build their inputs from these.

A change is a function ``(metadata, directory)``: it edits the parsed metadata in place (and may
add files to the copied directory); :func:`edited` writes the result back as Flink bytes."""

from __future__ import annotations

import copy
import hashlib
import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path

from statemorph.savepoint.flink import (
    FileHandle,
    KeyGroupsHandle,
    RelativeFileHandle,
    parse_keyed_header,
    parse_metadata,
    serialize_metadata,
)
from statemorph.savepoint.flink.handles import ByteStreamHandle
from statemorph.savepoint.flink.keyed_blocks import key_group_extents
from statemorph.savepoint.flink.keyed_header import write_keyed_header
from statemorph.savepoint.flink.metadata import CheckpointMetadata, OperatorState

SAVEPOINTS = Path(__file__).resolve().parents[1] / "data" / "flink_savepoints"
EVENTS = SAVEPOINTS / "events-rocksdb-p2-files-snappy" / "savepoint"
"""600 keys of one value state, two subtasks, each keyed-state stream in its own file."""
KINDS_INLINE = SAVEPOINTS / "kinds-hashmap-p1" / "savepoint"
"""Eleven keyed states of every kind, one subtask, its stream inline in ``_metadata``."""
EVENTS_OPERATOR = "events-state"
EVENTS_ENTRIES = 600

Change = Callable[[CheckpointMetadata, Path], None]


def read_meta(d: Path) -> CheckpointMetadata:
    return parse_metadata((d / "_metadata").read_bytes())


def edited(src: Path, dst: Path, change: Change) -> Path:
    """A copy of the savepoint ``src`` at ``dst`` whose ``_metadata`` went through ``change``."""
    shutil.copytree(src, dst)
    meta = read_meta(dst)
    change(meta, dst)
    (dst / "_metadata").write_bytes(serialize_metadata(meta))
    return dst


def keyed_operator(meta: CheckpointMetadata) -> OperatorState:
    return next(op for op in meta.operators if any(st.managed_keyed for st in op.subtasks or []))


def keyed(meta: CheckpointMetadata, subtask: int) -> KeyGroupsHandle:
    h = (keyed_operator(meta).subtasks or [])[subtask].managed_keyed
    assert h is not None
    return h


# -- handles used twice --------------------------------------------------------------------------

def operator_state_names_keyed_file(meta: CheckpointMetadata, d: Path) -> None:
    """The source operator's operator state points at subtask 0's keyed-state file."""
    st = next(st for op in meta.operators for st in op.subtasks or [] if st.managed_operator is not None)
    assert st.managed_operator is not None
    dlg = keyed(meta, 0).delegate
    st.managed_operator.delegate = copy.deepcopy(dlg)


def subtasks_share_a_file(meta: CheckpointMetadata, d: Path) -> None:
    keyed(meta, 1).delegate = copy.deepcopy(keyed(meta, 0).delegate)


def subtask_index_twice(meta: CheckpointMetadata, d: Path) -> None:
    (keyed_operator(meta).subtasks or [])[1].index = 0


def operator_twice(meta: CheckpointMetadata, d: Path) -> None:
    meta.operators.append(copy.deepcopy(keyed_operator(meta)))


def one_file_under_two_names(meta: CheckpointMetadata, d: Path) -> None:
    """Subtask 1 names a hard link to subtask 0's file: two names, one file."""
    dlg = keyed(meta, 0).delegate
    assert isinstance(dlg, RelativeFileHandle)
    os.link(d / dlg.relative_path, d / "alias")
    keyed(meta, 1).delegate = RelativeFileHandle("alias", dlg.size)


HANDLE_REUSE: dict[str, Change] = {
    "operator-state-names-keyed-file": operator_state_names_keyed_file,
    "subtasks-share-a-file": subtasks_share_a_file,
    "subtask-index-twice": subtask_index_twice,
    "operator-twice": operator_twice,
    "one-file-two-names": one_file_under_two_names,
}


# -- key-group ranges ----------------------------------------------------------------------------

def range_past_max_parallelism(meta: CheckpointMetadata, d: Path) -> None:
    keyed(meta, 1).start_key_group = 100  # 100..163 at max parallelism 128


def ranges_overlap(meta: CheckpointMetadata, d: Path) -> None:
    keyed(meta, 1).start_key_group = 32  # 32..95 overlaps subtask 0's 0..63


def subtask_past_parallelism(meta: CheckpointMetadata, d: Path) -> None:
    (keyed_operator(meta).subtasks or [])[1].index = 5  # parallelism 2


RANGES: dict[str, Change] = {
    "range-past-max-parallelism": range_past_max_parallelism,
    "ranges-overlap": ranges_overlap,
    "subtask-past-parallelism": subtask_past_parallelism,
}


def state_twice_in_header(meta: CheckpointMetadata, d: Path) -> None:
    """The inline stream's header lists its second state under the first one's name (the key
    groups shifted by the header's change of length)."""
    h = keyed(meta, 0)
    assert isinstance(h.delegate, ByteStreamHandle)
    data = h.delegate.data
    end, _ = key_group_extents(h, len(data), "state-twice")
    header = parse_keyed_header(data[:end], end, "state-twice")
    header.states[1].name = header.states[0].name
    head = write_keyed_header(header)
    h.offsets = [o + len(head) - end if o else 0 for o in h.offsets]
    h.delegate = ByteStreamHandle(h.delegate.name, head + data[end:])


# -- paths ---------------------------------------------------------------------------------------

def keyed_path(path: str) -> Change:
    """Subtask 0's keyed-state handle names ``path`` (relative or absolute)."""
    def change(meta: CheckpointMetadata, d: Path) -> None:
        h = keyed(meta, 0)
        h.delegate = RelativeFileHandle(path, getattr(h.delegate, "size", 0))
    return change


def absolute_keyed_path(directory: str) -> Change:
    """Subtask 0's keyed-state handle is an absolute handle (entropy injection) under ``directory``:
    read by its file name inside the savepoint, the same file."""
    def change(meta: CheckpointMetadata, d: Path) -> None:
        h = keyed(meta, 0)
        assert isinstance(h.delegate, RelativeFileHandle)
        h.delegate = FileHandle(f"{directory}/{h.delegate.relative_path}", h.delegate.size)
    return change


def symlinked_keyed_file(target: Callable[[Path, str], str]) -> Change:
    """Subtask 0's keyed-state handle names ``link``, a symlink to ``target(directory, file)``."""
    def change(meta: CheckpointMetadata, d: Path) -> None:
        h = keyed(meta, 0)
        assert isinstance(h.delegate, RelativeFileHandle)
        os.symlink(target(d, h.delegate.relative_path), d / "link")
        h.delegate = RelativeFileHandle("link", h.delegate.size)
    return change


# -- the Parquet form's kept skeleton ------------------------------------------------------------

def edit_skeleton(pq_dir: Path, change: Callable[[CheckpointMetadata], None]) -> None:
    """Change ``flink/_metadata`` of a Parquet-form savepoint converted from Flink, and record its
    new size and sha256 in ``_metadata.json`` (what anyone who can write the files can do)."""
    doc_path = pq_dir / "_metadata.json"
    doc = json.loads(doc_path.read_text(encoding="utf-8"))
    entry = doc["flink"]["metadata"]
    path = pq_dir / entry["path"]
    meta = parse_metadata(path.read_bytes())
    change(meta)
    data = serialize_metadata(meta)
    path.unlink()  # a converted savepoint may share the inode with another copy
    path.write_bytes(data)
    entry["size"], entry["sha256"] = len(data), hashlib.sha256(data).hexdigest()
    doc_path.write_text(json.dumps(doc), encoding="utf-8")


def listing(root: Path) -> list[str]:
    """Every path under ``root`` (what a refused run must leave as it found it)."""
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))
