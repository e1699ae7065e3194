"""Comparing two savepoints as the Spark tests need it: the same metadata and the same rows, whichever
engine wrote them (row order within a state may differ)."""

from __future__ import annotations

import pyarrow as pa

from statemorph.savepoint import read_state_table, verify_savepoint


def _sorted(table: pa.Table) -> pa.Table:
    keys = [(c, "ascending") for c in table.column_names if c != "value"] + [("value", "ascending")]
    return table.sort_by(keys)


def assert_same_savepoint(a: str, b: str) -> None:
    """Same metadata (states, kinds, snapshots, row counts) and the same rows in every state."""
    ma, mb = verify_savepoint(a), verify_savepoint(b)
    assert ma.max_parallelism == mb.max_parallelism and ma.key_serializer == mb.key_serializer
    assert list(ma.states) == list(mb.states)
    for name, sa in ma.states.items():
        sb = mb.states[name]
        assert (sa.kind, sa.rows, sa.value_serializer, sa.user_key_serializer, sa.namespace_serializer) == \
               (sb.kind, sb.rows, sb.value_serializer, sb.user_key_serializer, sb.namespace_serializer)
        assert _sorted(read_state_table(a, name)).equals(_sorted(read_state_table(b, name)))
