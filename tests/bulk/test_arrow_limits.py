"""One outcome per input on every path (issue 16, item 2): what Arrow cannot hold, and duplicate
map keys.

Why: the per-value reference (``from_bytes``, ``migrate_bytes``), bulk decode / migrate on both
kernel tiers and the decode / migrate machine code must give every input the same value or the
same error class. Two things Arrow cannot hold are refused by bulk decode with
``UnrepresentableValueError`` naming the field path (never dropped): a null MAP key and a nested
row whose RowKind is not INSERT. A map with two equal keys (the reference's value equality, the
one definition of a duplicate key) is refused by every reader and by bulk migrate alike.
"""

from __future__ import annotations

import datetime as dt
import decimal
from typing import Any

import pyarrow as pa
import pytest

from statemorph import arrow, bulk
from statemorph import serializers as S
from statemorph.errors import MalformedDataError, UnrepresentableValueError
from statemorph.migration import migrate_bytes
from statemorph.row import Row, RowKind
from statemorph.serializers.tuples import RowSerializer
from statemorph.types import Timestamp


@pytest.fixture(params=[False, True], ids=["walk", "machine-code"])
def paths(request: pytest.FixtureRequest, tier: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every kernel path: each tier, and on the compiled tier machine code for every chunk."""
    if request.param:
        monkeypatch.setattr(bulk.tiers, "MACHINE_CODE_MIN", 0)
    return f"{tier}-{'jit' if request.param else 'walk'}"


def _errors(errors: list[Exception]) -> list[tuple[int, str, type]]:
    return [(e.row, e.field_path, type(e)) for e in errors]  # type: ignore[attr-defined]


# ------------------------------------------------------------------------------ null map keys

NULL_KEYS = S.RowDataSerializer("ROW<a INT, m MAP<STRING, ARRAY<INT>>, ms MULTISET<BIGINT>, "
                                "dm ARRAY<MAP<INT, STRING>>>")


@pytest.mark.parametrize("value,path", [
    ((1, {None: [1], "k": []}, None, None), "m.key[]"),
    ((2, None, {None: 2, 5: 1}, None), "ms.key[]"),
    ((3, None, None, [{1: "x"}, {None: "y"}]), "dm[].key[]"),
])
def test_null_map_key_is_refused_naming_the_path(paths: str, value: Any, path: str) -> None:
    """from_bytes reads a null key; an Arrow map key cannot be null: bulk decode refuses the entry
    with the field path, the rows around it decode."""
    s = NULL_KEYS
    raw, good = s.to_bytes(value), s.to_bytes((9, {"k": [1, None]}, {7: 2}, [{1: "x"}]))
    assert s.from_bytes(raw) == value
    out, errors = bulk.decode(pa.array([good, raw, None, good]), s, on_error="null")
    assert _errors(errors) == [(1, path, UnrepresentableValueError)]
    assert "null map key" in str(errors[0]) and "row 1" in str(errors[0])
    assert out.is_valid().to_pylist() == [True, False, False, True]
    assert out[0].as_py() == out[3].as_py() == {"a": 9, "m": [("k", [1, None])], "ms": [(7, 2)], "dm": [[(1, "x")]]}
    with pytest.raises(UnrepresentableValueError):
        arrow.decode(pa.array([raw]), s)


def test_null_map_key_migrates_as_migrate_bytes_does(paths: str) -> None:
    """Null keys are valid bytes (only Arrow cannot hold them): migration keeps them."""
    old, new = NULL_KEYS, S.RowDataSerializer("ROW<a INT, m MAP<STRING, ARRAY<INT>>, ms MULTISET<BIGINT>, "
                                              "dm ARRAY<MAP<INT, STRING>>, z STRING>")
    snap = old.snapshot_configuration()
    raws = [old.to_bytes((1, {None: [1], "k": []}, {None: 2}, [{None: "y"}])), old.to_bytes((2, None, None, None))]
    out = bulk.migrate(pa.array(raws), snap, new, on_error="null")
    assert not out.errors
    assert out.values.to_pylist() == [migrate_bytes(snap, new, r) for r in raws]


# ------------------------------------------------------------------------- nested row kinds

NESTED = S.RowDataSerializer("ROW<a INT, c ROW<x BIGINT, s STRING>, xs ARRAY<ROW<p BIGINT>>, "
                             "m MAP<STRING, ROW<q INT>>>")
NESTED_ADDED = S.RowDataSerializer("ROW<a INT, c ROW<x BIGINT, s STRING, t INT>, xs ARRAY<ROW<p BIGINT, r INT>>, "
                                   "m MAP<STRING, ROW<q INT>>, z INT>")


@pytest.mark.parametrize("value,path,kind", [
    ((1, Row((2, "x"), RowKind.DELETE), None, None), "c", "DELETE"),
    ((1, None, [(1,), Row((2,), RowKind.UPDATE_BEFORE)], None), "xs[]", "UPDATE_BEFORE"),
    ((1, None, None, {"k": Row((3,), RowKind.UPDATE_AFTER)}), "m.value[]", "UPDATE_AFTER"),
])
def test_nested_row_kind_is_refused_naming_the_path(paths: str, value: Any, path: str, kind: str) -> None:
    """An Arrow struct has no row kind: a nested row other than INSERT is refused (it used to be
    read as INSERT), in a long column too (the blocked walk, the machine code); from_bytes keeps
    the kind."""
    s = NESTED
    raw = s.to_bytes(value)
    got = s.from_bytes(raw)
    assert any(isinstance(v, Row) and v.kind.name == kind for v in _rows_in(got))
    goods = [s.to_bytes((i, (i, "y" * (i % 9)), [(i,)], {"k": (i,)})) for i in range(700)]
    column = goods[:300] + [raw] + goods[300:]
    out, errors = bulk.decode(pa.array(column), s, on_error="null")
    assert _errors(errors) == [(300, path, UnrepresentableValueError)]
    assert kind in str(errors[0])
    assert out.null_count == 1 and not out[300].is_valid
    assert out.filter(out.is_valid()).to_pylist() == arrow.decode(pa.array(goods), s).to_pylist()


def _rows_in(value: Any) -> list[Any]:
    if isinstance(value, tuple):
        return [value] + [r for v in value for r in _rows_in(v)]
    if isinstance(value, list):
        return [r for v in value for r in _rows_in(v)]
    if isinstance(value, dict):
        return [r for v in value.values() for r in _rows_in(v)]
    return []


def test_top_level_row_kind_is_left_out(paths: str) -> None:
    """The top-level row's kind is the record's changelog flag (Flink SQL state keeps UPDATE_AFTER
    rows): decode reads the fields, as documented in docs/bulk.md."""
    raw = NESTED.to_bytes(Row((1, (2, "x"), [(3,)], {"k": (4,)}), RowKind.UPDATE_AFTER))
    assert arrow.decode(pa.array([raw]), NESTED).to_pylist() == [
        {"a": 1, "c": {"x": 2, "s": "x"}, "xs": [{"p": 3}], "m": [("k", {"q": 4})]}]


@pytest.mark.parametrize("new", [NESTED, NESTED_ADDED], ids=["as-is", "fields-added"])
def test_bulk_migrate_keeps_nested_row_kinds(paths: str, new: Any) -> None:
    """Migration rewrites bytes to bytes: every row kind, nested or not, is kept, as migrate_bytes
    keeps it."""
    snap = NESTED.snapshot_configuration()
    value = Row((1, Row((2, "x"), RowKind.DELETE), [Row((3,), RowKind.UPDATE_BEFORE)],
                 {"k": Row((4,), RowKind.UPDATE_AFTER)}), RowKind.UPDATE_AFTER)
    raws = [NESTED.to_bytes(value)] * 3
    out = bulk.migrate(pa.array(raws), snap, new, on_error="null")
    assert not out.errors
    want = migrate_bytes(snap, new, raws[0])
    assert out.values.to_pylist() == [want] * 3
    back = new.from_bytes(want)
    assert [r.kind for r in (back, back[1], back[2][0], back[3]["k"])] == [
        RowKind.UPDATE_AFTER, RowKind.DELETE, RowKind.UPDATE_BEFORE, RowKind.UPDATE_AFTER]


def test_flink_core_nested_row_kind_is_refused_naming_the_path(tier: str) -> None:
    """The flink-core Row format carries kinds in its mask: the same rule as RowData."""
    meta = RowSerializer([S.IntSerializer(), S.LongSerializer(), S.StringSerializer()],
                         field_names=["userId", "timestamp", "deviceType"])
    events = RowSerializer([S.LongSerializer(), meta], field_names=["eventId", "metadata"])
    raw = events.to_bytes(Row([1, Row([2, 3, "x"], RowKind.DELETE)], RowKind.UPDATE_AFTER))
    good = events.to_bytes(Row([4, Row([5, 6, "y"])], RowKind.UPDATE_AFTER))
    out, errors = bulk.decode(pa.array([good, raw, None]), events, on_error="null")
    assert out.to_pylist() == [{"eventId": 4, "metadata": {"userId": 5, "timestamp": 6, "deviceType": "y"}},
                               None, None]
    assert _errors(errors) == [(1, "metadata", UnrepresentableValueError)]
    assert "DELETE" in str(errors[0]) and "row 1" in str(errors[0])
    with pytest.raises(UnrepresentableValueError):
        arrow.decode(pa.array([raw]), events)
    assert events.from_bytes(raw)[1].kind == RowKind.DELETE


# ------------------------------------------------------------------------ duplicate map keys

_T9 = Timestamp.from_epoch_nanos(1_700_000_000_123_456_789)


@pytest.mark.parametrize("key_type,a,b", [
    ("STRING", "k", "k"),
    ("STRING", "a-key-longer-than-seven", "a-key-longer-than-seven"),
    ("INT", 7, 7),
    ("BOOLEAN", True, True),
    ("DOUBLE", 0.0, -0.0),  # equal values: one dict key
    ("DECIMAL(30, 4)", decimal.Decimal("12.5000"), decimal.Decimal("12.5000")),  # stored out of line
    ("DECIMAL(10, 2)", decimal.Decimal("1.25"), decimal.Decimal("1.25")),
    ("TIMESTAMP(9)", _T9, _T9),  # stored out of line
    ("TIMESTAMP(3)", dt.datetime(2024, 1, 2, 3, 4, 5), dt.datetime(2024, 1, 2, 3, 4, 5)),
    ("ROW<p INT>", (1,), (1,)),
])
def test_duplicate_map_key_refused_on_every_path(paths: str, key_type: str, a: Any, b: Any) -> None:
    """Two equal keys in one map: from_bytes, migrate_bytes, bulk decode and bulk migrate (as is,
    and with a field added) all refuse the entry with a MalformedDataError; it is never copied."""
    old = S.RowDataSerializer(f"ROW<id INT, m MAP<{key_type}, INT>>")
    added = S.RowDataSerializer(f"ROW<id INT, m MAP<{key_type}, INT>, z STRING>")
    raw = old.to_bytes((1, [(a, 1), (b, 2)]))  # a list of pairs is written as it is
    good = old.to_bytes((2, {a: 3}))
    with pytest.raises(MalformedDataError, match="duplicate map key"):
        old.from_bytes(raw)
    snap = old.snapshot_configuration()
    column = pa.array([good, raw, None])
    _, errors = bulk.decode(column, old, on_error="null")
    assert [(e.row, type(e)) for e in errors] == [(1, MalformedDataError)]
    for new in (old, added):
        with pytest.raises(MalformedDataError, match="duplicate map key"):
            migrate_bytes(snap, new, raw)
        out, errors = bulk.migrate(column, snap, new, on_error="null")
        assert [(e.row, type(e)) for e in errors] == [(1, MalformedDataError)]
        assert "duplicate map key" in str(errors[0])
        assert out.to_pylist() == [migrate_bytes(snap, new, good), None, None]


@pytest.mark.parametrize("key_type,a,b", [
    ("DOUBLE", float("nan"), float("nan")),  # NaN equals nothing, itself included: two keys
    ("DOUBLE", 1.0, 2.0),
    ("DECIMAL(30, 4)", decimal.Decimal("12.5000"), decimal.Decimal("-12.5000")),
    ("TIMESTAMP(9)", _T9, Timestamp.from_epoch_nanos(1_700_000_000_123_456_788)),
    ("ROW<p INT>", (1,), (2,)),
])
def test_distinct_keys_that_may_look_alike_read_and_migrate(paths: str, key_type: str, a: Any, b: Any) -> None:
    """Keys the kernels cannot tell apart by hash alone go to the reference, which keeps them:
    every path reads / migrates them as the reference does."""
    old = S.RowDataSerializer(f"ROW<id INT, m MAP<{key_type}, INT>>")
    added = S.RowDataSerializer(f"ROW<id INT, m MAP<{key_type}, INT>, z STRING>")
    raw = old.to_bytes((1, [(a, 1), (b, 2)]))
    assert len(old.from_bytes(raw)[1]) == 2
    out, errors = bulk.decode(pa.array([raw]), old, on_error="null")
    assert not errors and len(out[0]["m"]) == 2
    snap = old.snapshot_configuration()
    for new in (old, added):
        out, errors = bulk.migrate(pa.array([raw, raw]), snap, new, on_error="null")
        assert not errors
        assert out.to_pylist() == [migrate_bytes(snap, new, raw)] * 2


def test_encode_of_a_handed_back_entry_keeps_nanoseconds(paths: str) -> None:
    """An Arrow map with repeated keys goes to the reference encoder (its last value wins); the
    entry's TIMESTAMP(9) values must keep every nanosecond there too (Arrow hands them out as
    pandas Timestamps, a datetime subclass: read as a datetime they lost the last three digits)."""
    s = S.RowDataSerializer("ROW<id INT, t TIMESTAMP(9), m MAP<TIMESTAMP(9), INT>>")
    ns = 1_700_000_000_123_456_789
    arr = pa.array([{"id": 1, "t": ns, "m": [(ns, 1)]}, {"id": 2, "t": ns, "m": [(5, 1), (5, 2)]}],
                   type=arrow.arrow_type(s.row_type))
    out = [s.from_bytes(b) for b in arrow.encode(arr, s).to_pylist()]
    assert out == [(1, _T9, {_T9: 1}), (2, _T9, {Timestamp.from_epoch_nanos(5): 2})]
