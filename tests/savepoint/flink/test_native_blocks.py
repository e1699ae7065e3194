"""A native instance's key group is written to the canonical stream in pieces (never held whole):
the pieces concatenate to exactly the block :func:`encode_key_group` makes of the whole group,
uncompressed and Snappy-framed, whatever the piece size and wherever an entry falls."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import statemorph.savepoint.flink.native as native
from statemorph.errors import FlinkSavepointError
from statemorph.savepoint.flink.keyed_blocks import StateRun, encode_key_group
from statemorph.savepoint.flink.snappy import MAX_CHUNK_DATA


class Pieces:
    def __init__(self) -> None:
        self.data = bytearray()
        self.calls = 0

    def add_encoded_key_group(self, kg: int, data: bytes) -> None:
        self.data += bytes(data)
        self.calls += 1


keys = st.binary(min_size=0, max_size=12).map(lambda b: b"\x05" + b)
runs = st.lists(st.tuples(st.integers(0, 12), st.lists(st.tuples(keys, st.binary(max_size=3000)), min_size=1,
                                                      max_size=40)),
                max_size=5, unique_by=lambda r: r[0])


@settings(max_examples=60, deadline=None)
@given(runs, st.booleans(), st.sampled_from([MAX_CHUNK_DATA, 2 * MAX_CHUNK_DATA]), st.binary(max_size=200_000))
def test_pieces_concatenate_to_the_whole_block(group_runs: list, compressed: bool, piece: int,
                                               big: bytes) -> None:
    group = [StateRun(sid, [k for k, _ in es], [v for _, v in es]) for sid, es in group_runs]
    if group and big:
        group[0].values[0] = big  # a value across pieces
    old = native.PIECE_BYTES
    native.PIECE_BYTES = piece
    try:
        out = Pieces()
        entries = ((r.state_id, k, v) for r in group for k, v in zip(r.keys, r.values, strict=True))
        native.write_block(entries, out, 5, compressed, "test")
    finally:
        native.PIECE_BYTES = old
    if not group:
        assert out.calls == 0
    else:
        assert bytes(out.data) == encode_key_group(group, compressed)


def test_a_key_with_the_flag_bit_is_refused() -> None:
    with pytest.raises(FlinkSavepointError, match="key-group prefix"):
        native.write_block(iter([(0, b"\x85k", b"v")]), Pieces(), 5, False, "test")
