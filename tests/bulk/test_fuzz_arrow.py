"""Fuzzing the bulk Arrow API (``statemorph.arrow.decode`` / ``migrate``) with mutated entries.

Why: the bulk path runs compiled kernels over whole columns of untrusted savepoint bytes. A bad
entry must become a typed error naming its row (``on_error="raise"``), or a null (``"null"``)
or a left-out row (``"skip"``), with its error in the result's report; it must never crash, and the
kernels must judge every entry exactly as the per-value reference serializers do (the oracle):
same rows rejected, same values for the rows accepted. Both kernel tiers run in one process.
"""

from __future__ import annotations

import dataclasses
import struct
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from bulk.fuzz_cases import (
    CASES,
    COMPACT,
    MIGRATIONS,
    PER_VALUE_MIGRATIONS,
    RANGE_ONLY,
    beyond_arrow_nanos,
    has_lone_surrogate,
    reencoded,
    reencoded_with,
    without_row_kind,
)
from bulk.fuzz_cases import compact_rows as _compact_rows  # names the tests use (hypothesis seeds from their source)
from bulk.fuzz_cases import nested_rows as _nested_rows
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from statemorph import arrow, bulk
from statemorph import serializers as S
from statemorph.errors import StateFormatError
from statemorph.migration import migrate_bytes

FUZZ = settings(max_examples=40, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
HOSTILE_I32 = (0x7FFFFFFF, 0x80000000, 0xFFFFFFFF)


@pytest.fixture
def tier(tier: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """The shared ``tier`` fixture (tests/conftest.py), with machine code for every chunk on the
    compiled tier (the kernels' own walks are fuzzed through the entries it hands back, and by the
    small arrays of the other tests)."""
    monkeypatch.setattr(bulk.tiers, "MACHINE_CODE_MIN", 0)
    return tier


@st.composite
def mutated_column(draw: st.DrawFn, entries: list[bytes]) -> list[bytes | None]:
    """The valid entries (plus a null), with some of them mutated."""
    column: list[bytes | None] = list(entries)
    column.insert(draw(st.integers(0, len(column))), None)
    for _ in range(draw(st.integers(1, 3))):
        i = draw(st.sampled_from([j for j, e in enumerate(column) if e is not None]))
        data = bytearray(column[i] or b"")
        op = draw(st.sampled_from(["flip", "truncate", "word", "append", "empty"]))
        pos = draw(st.integers(0, max(len(data) - 1, 0)))
        if op == "flip" and data:
            data[pos] ^= 1 << draw(st.integers(0, 7))
        elif op == "truncate":
            del data[pos:]
        elif op == "word":
            data[pos:pos + 4] = struct.pack(">I", draw(st.sampled_from(HOSTILE_I32)))
        elif op == "append":
            data += draw(st.binary(min_size=1, max_size=4))
        else:
            data = bytearray()
        column[i] = bytes(data)
    return column


@dataclasses.dataclass
class Oracle:
    """Per-entry verdicts of the reference serializers."""

    values: list[Any]  # the reference result per row (None for null entries and rejected rows)
    bad: list[int]  # rows the bulk API must reject
    either: list[int]  # rows it may reject or accept (see RANGE_ONLY; Arrow-unrepresentable strings)


def reference(fn: Any, column: list[bytes | None], arrow_values: bool = True, write: Any = None) -> Oracle:
    """What the per-value reference says of every entry. With ``write`` (the serializer's
    ``to_bytes``), a value it refuses to write back is one the bulk decode may reject too: a corrupt
    compact DECIMAL with more digits than its precision (Flink reads it as it is; Arrow's
    decimal128(p) cannot hold it)."""
    oracle = Oracle([], [], [])
    for i, raw in enumerate(column):
        value = None
        if raw is not None:
            try:
                value = fn(raw)
            except StateFormatError as e:
                (oracle.either if RANGE_ONLY.search(str(e)) else oracle.bad).append(i)
            else:
                if arrow_values and (has_lone_surrogate(value) or beyond_arrow_nanos(value)
                                     or (write is not None and reencoded_with(write, value) is None)):
                    oracle.either.append(i)
                    value = None
        oracle.values.append(value)
    return oracle


def check_on_error_modes(run: Any, column: list[bytes | None], oracle: Oracle) -> Any:
    """The three on_error modes agree with the oracle; returns the null-mode result with the
    rows the bulk API kept although the oracle has no value for them set to null."""
    arr = pa.array(column, type=pa.binary())
    collected, errors = run(arr, "null")
    rejected = [e.row for e in errors]
    assert all(isinstance(e, StateFormatError) and f"row {e.row}" in str(e) for e in errors)
    assert rejected == sorted(set(rejected)), rejected
    assert set(oracle.bad) <= set(rejected) <= set(oracle.bad) | set(oracle.either), (rejected, oracle)
    if rejected:
        with pytest.raises(StateFormatError) as info:
            run(arr, "raise")
        assert getattr(info.value, "row", None) == rejected[0], (str(info.value), rejected)
        assert f"row {rejected[0]}" in str(info.value)
    else:
        run(arr, "raise")
    nulled = collected
    assert len(nulled) == len(column)
    skipped = run(arr, "skip")
    assert skipped.bad_rows == rejected
    kept = nulled.filter(pa.array([i not in rejected for i in range(len(column))]))
    # the same rows as "null" leaves, bad ones left out (values may be NaN or beyond Python's dates)
    assert len(skipped.values) == len(kept) and skipped.values.is_valid().equals(kept.is_valid())
    for i in range(len(column)):
        if i in oracle.either and i not in rejected:
            continue
        should_be_null = oracle.values[i] is None
        assert nulled[i].is_valid is not should_be_null, (i, column[i])
    keep = pa.array([i not in oracle.either for i in range(len(column))])
    return pc.if_else(keep, nulled, pa.nulls(len(column), type=nulled.type))


@pytest.mark.parametrize("name", list(CASES))
@FUZZ
@given(data=st.data())
def test_decode_mutated_entries(tier: str, name: str, data: st.DataObject) -> None:
    ser, values = CASES[name]
    column = data.draw(mutated_column([ser.to_bytes(v) for v in values]), label="column")
    oracle = reference(ser.from_bytes, column, write=ser.to_bytes)
    nulled = check_on_error_modes(lambda arr, mode: bulk.decode(arr, ser, on_error=mode), column, oracle)
    # accepted rows decode to the reference's values: compare through the bytes both re-encode to
    again = arrow.encode(nulled, ser, on_error="null").to_pylist()
    assert without_row_kind(ser, again) == without_row_kind(ser, [reencoded(ser, v) for v in oracle.values])


@pytest.mark.parametrize("name", list(MIGRATIONS))
@FUZZ
@given(data=st.data())
def test_migrate_mutated_entries(tier: str, name: str, data: st.DataObject) -> None:
    old_type, new_type = MIGRATIONS[name]
    old, new = S.RowDataSerializer(old_type), S.RowDataSerializer(new_type)
    rows = _compact_rows() if old_type == COMPACT else _nested_rows()
    snap = old.snapshot_configuration()
    column = data.draw(mutated_column([old.to_bytes(r) for r in rows]), label="column")
    oracle = reference(lambda raw: migrate_bytes(snap, new, raw), column, arrow_values=False)
    nulled = check_on_error_modes(lambda arr, mode: bulk.migrate(arr, snap, new, on_error=mode), column, oracle)
    assert nulled.to_pylist() == oracle.values


@pytest.mark.parametrize("name", list(PER_VALUE_MIGRATIONS))
@FUZZ
@given(data=st.data())
def test_migrate_mutated_entries_per_value(tier: str, name: str, data: st.DataObject) -> None:
    """The same verdicts as ``migrate_bytes`` for every entry, and the same values. Values, not
    bytes: the Row remap kernel copies field bytes as they are, where the per-value path rewrites
    them canonically (a NaN payload, a null string inside a non-null mask slot)."""
    old, new, values = PER_VALUE_MIGRATIONS[name]
    snap = old.snapshot_configuration()
    column = data.draw(mutated_column([old.to_bytes(v) for v in values]), label="column")
    oracle = reference(lambda raw: migrate_bytes(snap, new, raw), column, arrow_values=False)
    nulled = check_on_error_modes(lambda arr, mode: bulk.migrate(arr, snap, new, on_error=mode), column, oracle)
    got = [None if b is None else repr(new.from_bytes(b)) for b in nulled.to_pylist()]
    assert got == [None if b is None else repr(new.from_bytes(b)) for b in oracle.values]


@pytest.mark.parametrize("name", list(CASES))
def test_decode_hostile_length_in_every_entry_position(tier: str, name: str) -> None:
    """0x7fffffff over every 4-byte window of one entry, all in one column: each row is judged alone."""
    ser, values = CASES[name]
    good = ser.to_bytes(values[-1])
    column: list[bytes | None] = [good[:p] + b"\x7f\xff\xff\xff" + good[p + 4:] for p in range(len(good))]
    column.append(good)
    check_on_error_modes(lambda arr, mode: bulk.decode(arr, ser, on_error=mode), column,
                         reference(ser.from_bytes, column, write=ser.to_bytes))


def test_sliced_and_large_binary_inputs_report_absolute_rows(tier: str) -> None:
    """Row indices in errors count from the start of the array the caller passed, whatever its
    offset or chunking."""
    ser, values = CASES["RowDataCompact"]
    entries = [ser.to_bytes(v) for v in values]
    broken = entries[:]
    broken[3] = entries[3][:5]
    for arr in (pa.array([b"junk"] + broken, type=pa.binary()).slice(1),
                pa.array(broken, type=pa.large_binary()),
                pa.chunked_array([pa.array(broken[:2], type=pa.binary()), pa.array(broken[2:], type=pa.binary())])):
        with pytest.raises(StateFormatError) as info:
            arrow.decode(arr, ser)
        assert info.value.row == 3, str(info.value)  # type: ignore[attr-defined]
        _, errors = bulk.decode(arr, ser, on_error="null")
        assert [e.row for e in errors] == [3]
