"""The one-pass migrate kernel (``migrate_run``) on both tiers: its output buffer is only a guess,
so force the guess to be far too small and check the grown result is byte-identical to the
two-pass scheme (threads=2) and to the per-value reference, with bad rows in between."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from statemorph import arrow, bulk, serializers
from statemorph.migration import migrate_bytes

OLD = "ROW<a BIGINT, r ROW<u INT, s STRING, xs ARRAY<ROW<p INT, q STRING>>>, m MAP<STRING, ROW<p INT, q STRING>>>"
NEW = ("ROW<m MAP<STRING, ROW<q STRING, z DOUBLE, p INT>>, r ROW<s STRING, w STRING, u INT, "
       "xs ARRAY<ROW<q STRING, p INT>>>, a BIGINT, b BIGINT>")


@pytest.fixture
def impl(tier: str) -> str:
    """The shared ``tier`` fixture (tests/conftest.py) under this file's name for it."""
    return tier


def _starve(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make the first output buffer 64 bytes whatever the input, so every run grows it."""
    monkeypatch.setattr(bulk.inputs, "input_spans", lambda *a: (lambda s, e: 0))
    monkeypatch.setattr(bulk.migrator, "row_growth", lambda m: 0)


text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=20)
int32 = st.integers(-2**31, 2**31 - 1)
inner = st.one_of(st.none(), st.tuples(st.one_of(st.none(), int32), st.one_of(st.none(), text)))
value = st.tuples(
    st.integers(-2**63, 2**63 - 1),
    st.one_of(st.none(), st.tuples(st.integers(-2**31, 2**31 - 1), st.one_of(st.none(), text),
                                   st.one_of(st.none(), st.lists(inner, max_size=4)))),
    st.one_of(st.none(), st.dictionaries(text, inner, max_size=3)),
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=st.lists(st.one_of(st.none(), value), min_size=1, max_size=30))
def test_grown_buffer_matches_two_pass_and_reference(impl: str, rows: list[Any]) -> None:
    so, sn = serializers.RowDataSerializer(OLD), serializers.RowDataSerializer(NEW)
    snap = so.snapshot_configuration()
    blobs = [None if r is None else so.to_bytes(r) for r in rows]
    arr = pa.array(blobs, pa.binary())
    expected = [None if b is None else migrate_bytes(snap, sn, b) for b in blobs]
    with pytest.MonkeyPatch.context() as mp:
        _starve(mp)
        one = arrow.migrate(arr, snap, sn)
    assert one.to_pylist() == expected
    assert arrow.migrate(arr, snap, sn, threads=2).to_pylist() == expected
    assert one.equals(arrow.migrate(arr, snap, sn))


def test_bad_rows_take_no_bytes_and_match_two_pass(impl: str, monkeypatch: pytest.MonkeyPatch) -> None:
    so, sn = serializers.RowDataSerializer(OLD), serializers.RowDataSerializer(NEW)
    snap = so.snapshot_configuration()
    good = so.to_bytes((1, (2, "a string longer than seven", [(3, "x"), None]), {"k": (4, "y")}))
    truncated = good[:-9]
    bad_header = good[:4] + b"\x07" + good[5:]
    blobs = [good, truncated, None, bad_header, good] * 300
    arr = pa.array(blobs, pa.binary())
    _starve(monkeypatch)
    out, errs = bulk.migrate(arr, snap, sn, on_error="null")
    two, errs2 = bulk.migrate(arr, snap, sn, on_error="null", threads=2)
    assert out.equals(two)
    assert [str(e) for e in errs] == [str(e) for e in errs2]
    assert len(errs) == 600
    migrated = migrate_bytes(snap, sn, good)
    assert out.to_pylist()[:5] == [migrated, None, None, None, migrated]
    offs = np.frombuffer(out.buffers()[1], dtype=np.int32)[:6]
    assert list(np.diff(offs)) == [len(migrated), 0, 0, 0, len(migrated)]
    with pytest.raises(Exception, match="row 1"):
        arrow.migrate(arr, snap, sn)


def test_wide_rows_null_bits_past_the_first_word(impl: str) -> None:
    """Fields 56+ have their null bits outside the first 64-bit word (a separate code path)."""
    old_fields = ", ".join(f"f{i} INT" for i in range(70))
    new_fields = ", ".join([f"g{i} STRING" for i in range(3)] + [f"f{i} INT" for i in reversed(range(70))])
    so, sn = serializers.RowDataSerializer(f"ROW<{old_fields}>"), serializers.RowDataSerializer(f"ROW<{new_fields}>")
    snap = so.snapshot_configuration()
    rows = [tuple(None if (i + r) % 3 == 0 else i * r for i in range(70)) for r in range(20)]
    blobs = [so.to_bytes(r) for r in rows]
    out = arrow.migrate(pa.array(blobs, pa.binary()), snap, sn)
    assert out.to_pylist() == [migrate_bytes(snap, sn, b) for b in blobs]
