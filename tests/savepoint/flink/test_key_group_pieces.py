"""A key group cut into runs of pieces for separate Spark tasks (``key_group_scan.key_group_pieces``)
begins each run with the hand-over its ``KeyGroupCut`` recorded there, and each run cut from it
makes exactly the slices the cut of the whole key group makes there. So a run migrates to the
bytes the local engine writes for those slices (compressed too: a run's output is its slices'
Snappy frames), and the runs of a key group, one after the other, are the local engine's key
group.

The planner marks only key groups stored in more than a task's share (and more than a slice) to
be cut; ``task_bytes`` sizes the shares instead of a task count."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from savepoint.flink.format_helpers import (
    N_STATES,
    cases,
    grown_bulk_streams,
    key_group_bytes,
    key_group_runs,
    small_chunks,
    state_operator,
)

from statemorph.savepoint.flink import FlinkSavepoint
from statemorph.savepoint.flink.bulk_blocks import migrated_blocks
from statemorph.savepoint.flink.files import InlineStream
from statemorph.savepoint.flink.key_group_scan import (
    HANDOVER_BYTES,
    KeyGroupCut,
    KeyGroupPiece,
    ScanArrays,
    ScannedGroup,
    key_group_pieces,
    scan_slices,
)
from statemorph.savepoint.flink.keyed_blocks import KeyGroupExtent
from statemorph.savepoint.flink.splits import key_group_splits


def _cut(g: ScannedGroup) -> tuple[bytes, int, bool, list[int], list[int]]:
    return bytes(memoryview(g.buf)[:g.end]), g.skip, g.first, g.val_pos.tolist(), g.run_state.tolist()


@settings(max_examples=200, deadline=None)
@given(key_group_runs, st.integers(1, 600), st.integers(1, 3000), st.booleans())
def test_pieces_are_runs_of_the_whole_scans_slices(spec: Any, slice_bytes: int, piece_bytes: int,
                                                   compressed: bool) -> None:
    data = key_group_bytes(spec)
    stored = small_chunks(data) if compressed else data  # cut between chunks: many small ones
    source, ext = InlineStream(stored, "sp"), KeyGroupExtent(7, 0, len(stored))
    whole = [_cut(g) for g in scan_slices(source, ext, compressed, N_STATES, "sp", slice_bytes)]
    pieces = key_group_pieces(source, ext, compressed, N_STATES, "sp", slice_bytes, piece_bytes)
    assert pieces[0].start is None
    assert pieces[-1].stop == KeyGroupCut(source, ext, compressed, N_STATES, "sp", slice_bytes).pieces
    assert [p.stop for p in pieces[:-1]] == [p.start.piece for p in pieces[1:] if p.start is not None]
    assert all(not p.start.needs and len(p.start.tail) + len(p.start.carry) <= HANDOVER_BYTES
               for p in pieces[1:] if p.start is not None)  # small hand-overs only: they ship to the tasks
    scanned = [_run(source, ext, compressed, slice_bytes, p) for p in pieces]
    got = [[_cut(g) for g in piece] for piece in scanned]
    assert all(got) and [g for piece in got for g in piece] == whole
    if not compressed:  # a piece's task holds a slice (and its first read piece), never the key group
        largest = max(10 + len(k) + len(v) for _, entries in spec for k, v in entries)
        assert max(memoryview(g.buf).nbytes for piece in scanned for g in piece) <= (
            2 + 2 * (largest + slice_bytes) + slice_bytes)
    if len(stored) > 4 * (piece_bytes + slice_bytes + 400):  # the cut really happens
        assert len(pieces) > 1


def _run(source: Any, ext: KeyGroupExtent, compressed: bool, slice_bytes: int,
         piece: KeyGroupPiece) -> list[ScannedGroup]:
    """The slices of one run of pieces, cut by a ``KeyGroupCut`` begun at its hand-over."""
    cut = KeyGroupCut(source, ext, compressed, N_STATES, "sp", slice_bytes, piece.start)
    scratch = ScanArrays()
    return [g for i in piece.pieces for g in cut.slices_of(i, scratch)]


def _joined(stream: Any, states: Any, slice_bytes: int, pieces: dict[int, list[Any]]) -> dict[int, bytes]:
    """Every key group's migrated stored bytes: whole, or its pieces' one after the other."""
    out: dict[int, bytes] = {}
    for ext in stream.extents:
        for piece in pieces.get(ext.key_group, [None]):
            for kg, data in migrated_blocks(stream, states, batch_values=50, key_groups=range(ext.key_group,
                                                                                             ext.key_group + 1),
                                            slice_bytes=slice_bytes, piece=piece):
                out[kg] = out.get(kg, b"") + bytes(data)
    return out


@pytest.mark.parametrize("case", cases(), ids=[c.name for c in cases()])
def test_pieces_migrate_to_the_local_engines_key_groups(case: Path) -> None:
    """Every key group of the committed real-Flink savepoints cut into runs of pieces of about 50
    stored bytes (uncompressed ones: a compressed key group of one Snappy chunk is one run), each
    migrated alone: the stored bytes (Snappy frames included) are those of
    the key group migrated in one pass with the same slices."""
    for stream, states in grown_bulk_streams(case):
        n_states, compressed = len(stream.header.states), stream.header.compressed
        pieces = {e.key_group: key_group_pieces(stream.source, e, compressed, n_states, stream.where, 16, 50)
                  for e in stream.extents if e.end - e.offset > 16}
        # a compressed key group is cut between its Snappy chunks: these are one chunk each
        assert compressed or any(len(p) > 1 for p in pieces.values()), case.name
        whole = _joined(stream, states, 16, {})
        assert whole and _joined(stream, states, 16, pieces) == whole, case.name


def test_the_planner_marks_key_groups_larger_than_a_share_to_be_cut() -> None:
    case = next(c for c in cases() if c.name == "kinds-rocksdb-p2-rowkey")
    sp = FlinkSavepoint(case / "savepoint")
    op = sp.operator(state_operator(sp))
    sizes = {(st.index, e.key_group): e.end - e.offset for st, stream in sp.keyed_streams(op) for e in stream.extents}
    share = sorted(sizes.values())[len(sizes) // 2]  # half of the key groups are larger
    splits = key_group_splits(op, 1, task_bytes=share, cut_above=64)
    cut = {(s.subtask, s.key_groups.start): s.cut for s in splits if s.cut}
    assert cut == {k: share for k, n in sizes.items() if n > share}
    assert all(len(s.key_groups) == 1 for s in splits if s.cut)
    covered = sorted((s.subtask, kg) for s in splits for kg in s.key_groups if (s.subtask, kg) in sizes)
    assert covered == sorted(sizes)  # every non-empty key group in exactly one split
    assert not any(s.cut for s in key_group_splits(op, 1, task_bytes=share, cut_above=max(sizes.values())))
    assert not any(s.cut for s in key_group_splits(op, 1000))  # without cut_above, never (the readers' ranges)
