"""Regression tests for bugs the fuzz / API-contract work found outside the fuzzed modules
(RocksDB handle lifetime, relative db paths, bulk decode of Tuple / POJO, timestamps beyond Arrow's
range). Each test names the module, the input and the expected behaviour."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from statemorph import arrow, bulk, serializers
from statemorph.errors import StateFormatError
from statemorph.state import EmbeddedRocksDBStateBackend, ValueStateDescriptor
from statemorph.types import Timestamp


def test_rocksdb_close_releases_the_database_lock(tmp_path: Path) -> None:
    """state/rocksdb.py: ``close()`` closes the main handle but not the column-family handles
    (``RocksDBStateTable.cf``), so rocksdict keeps the DB open and its LOCK held. Reopening the
    same path in the same process then fails with a bare ``builtins.Exception`` ("IO error: lock
    hold by current process ... LOCK: No locks available") - e.g. a second restore into
    ``db_path="db"``, or the design's contract run twice in one process."""
    db = tmp_path / "db"
    r = EmbeddedRocksDBStateBackend(serializers.StringSerializer(), db_path=db)
    events = r.get_state(ValueStateDescriptor("events", serializers.IntSerializer()))
    r.set_current_key("user-1")
    events.update(3)
    r.close()
    shutil.rmtree(db)
    r2 = EmbeddedRocksDBStateBackend(serializers.StringSerializer(), db_path=db)
    r2.close()


def test_rocksdb_relative_db_paths_in_different_directories(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """state/rocksdb.py: RocksDB locks by the path string it is given, so two backends opened
    with ``db_path="db"`` from different working directories collide although they are different
    directories. Resolving ``db_path`` to an absolute path before opening avoids it."""
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    monkeypatch.chdir(tmp_path / "a")
    r1 = EmbeddedRocksDBStateBackend(serializers.StringSerializer(), db_path="db")
    try:
        monkeypatch.chdir(tmp_path / "b")
        r2 = EmbeddedRocksDBStateBackend(serializers.StringSerializer(), db_path="db")
        r2.close()
    finally:
        r1.close()


@dataclasses.dataclass
class Item:
    sku: str | None = None
    qty: int | None = None


@pytest.mark.parametrize("ser,values", [
    (serializers.TupleSerializer([serializers.IntSerializer(), serializers.StringSerializer()]), [(1, "a"), (2, None)]),
    (serializers.PojoSerializer(Item, {"sku": serializers.StringSerializer(), "qty": serializers.IntSerializer()}),
     [Item("a", 1), Item(None, 2)]),
], ids=["Tuple", "Pojo"])
def test_arrow_decode_tuple_and_pojo(ser: Any, values: list[Any]) -> None:
    """arrow.py ``_decode_per_value``: ``pa.array(values)`` cannot infer a type for tuples of mixed
    types or for dataclass instances, so ``arrow.decode`` of perfectly valid Tuple / POJO bytes
    raises ``pyarrow.lib.ArrowInvalid`` ("Could not convert 'a' with type str: tried to convert to
    int64" / "did not recognize Python value type") although the module docstring lists both as
    supported per value. Expected: an Arrow array (e.g. a struct per tuple / POJO) of the values."""
    decoded = arrow.decode(pa.array([ser.to_bytes(v) for v in values], type=pa.binary()), ser)
    assert len(decoded) == len(values)
    assert arrow.encode(decoded, ser).to_pylist() == [ser.to_bytes(v) for v in values]


def test_arrow_decode_timestamp_beyond_int64_nanoseconds_is_a_typed_error() -> None:
    """arrow.py ``_decode_per_value``: a TIMESTAMP(9) whose millis (2**56, one hostile 4-byte
    word in a savepoint) do not fit int64 nanoseconds makes ``pa.array`` raise a bare
    ``OverflowError`` ("Python int too large to convert to C long") for the whole column.
    Expected: a StateFormatError naming the row (and a null / collected error with on_error)."""
    ser = serializers.RowDataSerializer("ROW<a INT, b ARRAY<STRING>, e TIMESTAMP(9)>")
    good = ser.to_bytes((1, ["x"], Timestamp(millis=1, nano_of_millisecond=5)))
    bad = ser.to_bytes((2, ["y"], Timestamp(millis=1 << 56, nano_of_millisecond=0)))
    column = pa.array([good, bad], type=pa.binary())
    with pytest.raises(StateFormatError) as info:
        arrow.decode(column, ser)
    assert info.value.row == 1  # type: ignore[attr-defined]
    nulled = arrow.decode(column, ser, on_error="null")
    assert nulled[0].is_valid and not nulled[1].is_valid
    _, errors = bulk.decode(column, ser, on_error="null")
    assert [e.row for e in errors] == [1]


@pytest.mark.parametrize("native", ["0", "1"])
def test_arrow_encode_refuses_decimal_beyond_its_precision(native: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Found by the arrow fuzz: a corrupt compact DECIMAL(10, 2) decodes to 11 digits; encoding that
    back must be refused on both tiers (the per-value serializer refuses it), not written."""
    import decimal

    from statemorph import kernels
    from statemorph.errors import SerializationError

    monkeypatch.setattr(kernels, "KERNELS", kernels.tier("native" if native == "1" else "python"))
    ser = serializers.RowDataSerializer("ROW<d DECIMAL(10, 2)>")
    big = pa.array([{"d": decimal.Decimal("12345678901.23")}], type=pa.struct([("d", pa.decimal128(38, 2))]))
    column = big.cast(pa.struct([("d", pa.decimal128(10, 2))]), safe=False)
    with pytest.raises(SerializationError, match="row 0"):
        arrow.encode(column, ser)
    assert arrow.encode(column, ser, on_error="null").to_pylist() == [None]
