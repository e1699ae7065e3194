"""The bulk key-group rewrite (``savepoint.flink.bulk_blocks``) writes exactly the bytes of the
per-entry path (parse_key_group → StateLayout.value_parts → new values → write_key_group), on
every committed real-Flink savepoint and every value, list and map state in it (with and without
TTL, null map values, heap run order, one state and all of them changing at once), with a value
migration that changes lengths; and a corrupt key group gets the per-entry reader's error."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from savepoint.flink.format_helpers import cases, state_operator

from statemorph.errors import FlinkSavepointError
from statemorph.savepoint.flink import FlinkSavepoint
from statemorph.savepoint.flink.bulk_blocks import BULK_KINDS, BulkValueRewriter
from statemorph.savepoint.flink.key_group_scan import scan_key_group
from statemorph.savepoint.flink.keyed_blocks import StateRun, parse_key_group, read_key_group_bytes, write_key_group
from statemorph.savepoint.flink.layout import StateLayout


def _grow(values: pa.Array) -> pa.Array:
    """A stand-in migration: every value reversed plus its length as one more byte."""
    return pa.array([v[::-1] + bytes([len(v) % 256]) for v in values.to_pylist()], pa.binary())


def _same(values: pa.Array) -> pa.Array:
    """A migration that hands back its input: every state's gathered values must stay intact
    until the key groups are rebuilt."""
    return values


def _per_entry(buf: bytes, n_states: int, layouts: dict[int, StateLayout], fn: Any) -> bytes:
    """The reference: every entry's value split by ``StateLayout.value_parts`` (TTL timestamps,
    map null flags, list elements), the user values migrated, and put back together."""
    runs, _ = parse_key_group(buf, n_states, "test", exact_end=True)
    out = []
    for r in runs:
        if r.state_id in layouts:
            users, rebuild = layouts[r.state_id].value_parts(r.values)
            r = StateRun(r.state_id, r.keys, rebuild(fn(pa.array(users, pa.binary())).to_pylist()))
        out.append(r)
    return write_key_group(out)


@pytest.mark.parametrize("case", cases(), ids=[c.name for c in cases()])
def test_bulk_rewrite_equals_the_per_entry_path(case: Path) -> None:
    sp = FlinkSavepoint(case / "savepoint")
    checked = 0
    op = sp.operator(state_operator(sp))
    for _, stream in sp.keyed_streams(op):
        kinds = {i: m for i, m in enumerate(stream.header.states) if m.kind in BULK_KINDS}
        n = len(stream.header.states)
        for subset, fn in [([i], _grow) for i in kinds] + [(list(kinds), _grow), (list(kinds), _same)]:
            layouts = {i: StateLayout(kinds[i], stream.header.key_serializer, op.max_parallelism, "test")
                       for i in subset}
            rw = BulkValueRewriter({i: (layouts[i], fn) for i in subset}, "test")
            want = {}
            for k, ext in enumerate(stream.extents):
                buf = read_key_group_bytes(stream.source, ext, stream.header.compressed, "test")
                rw.add(scan_key_group(ext.key_group, buf, n, "test"))
                want[ext.key_group] = _per_entry(buf, n, layouts, fn)
                if k % 5 == 4:  # flush in batches of several key groups, as the rewriter does
                    for g, data in rw.flush():
                        assert bytes(data) == want.pop(g.key_group), (case.name, subset, g.key_group)
                        checked += 1
            for g, data in rw.flush():
                assert bytes(data) == want.pop(g.key_group), (case.name, subset, g.key_group)
                checked += 1
            assert not want
    assert checked > 0


def test_corrupt_key_group_gets_the_entry_readers_error() -> None:
    good = write_key_group([StateRun(0, [b"\x01abc", b"\x01abd"], [b"v1", b"v22"])])
    bad = good[:-5]
    with pytest.raises(FlinkSavepointError) as bulk:
        scan_key_group(1, bad, 1, "sp")
    with pytest.raises(FlinkSavepointError) as entry:
        parse_key_group(bad, 1, "sp key group 1", exact_end=True)
    assert str(bulk.value) == str(entry.value)
