"""The bulk layer's surface: one ``on_error`` vocabulary (raise | skip | null) with every result in
a report (:class:`statemorph.bulk.BulkResult`), ``statemorph.arrow`` returning the array alone, and
the ONE capability table (keyed by classes) that bulk, the engines and the RocksDB backend consult."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pyarrow as pa
import pytest

from statemorph import arrow, bulk
from statemorph import serializers as S
from statemorph.bulk import capabilities
from statemorph.errors import ON_ERROR_CHOICES, StateFormatError, check_on_error
from statemorph.state import HeapStateBackend, RocksDBStateBackend, ValueStateDescriptor
from statemorph.state.rocksdb import bulk_migration_supported

OLD_ROW = S.RowDataSerializer("ROW<id BIGINT, name STRING>")
NEW_ROW = S.RowDataSerializer("ROW<name STRING, id BIGINT, extra INT>")
GOOD = [OLD_ROW.to_bytes((i, f"n{i}")) for i in range(6)]
BAD = b"\x00\x00"  # truncated


def _column() -> pa.ChunkedArray:
    """Rows 1 and 4 are bad, row 2 is null; two chunks, so rows are counted across chunks."""
    return pa.chunked_array([pa.array([GOOD[0], BAD, None], pa.binary()), pa.array([GOOD[3], BAD, GOOD[5]])])


def test_one_vocabulary_shared_with_the_engines() -> None:
    assert ON_ERROR_CHOICES == ("raise", "skip", "null")
    assert check_on_error("skip") == "skip"
    with pytest.raises(ValueError, match="on_error must be one of"):
        check_on_error("null", ("raise", "skip"))
    for fn, args in ((bulk.decode, (OLD_ROW,)), (bulk.migrate, (OLD_ROW.snapshot_configuration(), NEW_ROW))):
        with pytest.raises(ValueError, match="on_error must be one of"):
            fn(_column(), *args, on_error="collect")


@pytest.mark.parametrize("op", ["decode", "migrate"])
def test_null_and_skip_report_the_bad_rows(op: str) -> None:
    args = (OLD_ROW,) if op == "decode" else (OLD_ROW.snapshot_configuration(), NEW_ROW)
    fn = getattr(bulk, op)
    nulled = fn(_column(), *args, on_error="null")
    assert isinstance(nulled, bulk.BulkResult)
    assert nulled.bad_rows == [1, 4] and all(isinstance(e, StateFormatError) for e in nulled.errors)
    assert [e.row for e in nulled.errors] == [1, 4] and all(f"row {e.row}" in str(e) for e in nulled.errors)
    assert len(nulled.values) == 6 and nulled.values.null_count == 3  # the null input stays null
    skipped = fn(_column(), *args, on_error="skip")
    assert skipped.bad_rows == [1, 4] and len(skipped.values) == 4 and skipped.values.null_count == 1
    assert skipped.values.to_pylist() == [v for i, v in enumerate(nulled.values.to_pylist()) if i not in (1, 4)]
    with pytest.raises(StateFormatError) as info:
        fn(_column(), *args)
    assert info.value.row == 1  # type: ignore[attr-defined]
    clean = fn(pa.array(GOOD), *args, on_error="skip")
    assert clean.errors == [] and len(clean.values) == len(GOOD)


def test_skip_in_encode_leaves_out_values_the_serializer_refuses() -> None:
    ser = S.RowDataSerializer("ROW<id BIGINT NOT NULL, name STRING>")
    rows = pa.array([{"id": 1, "name": "a"}, {"id": None, "name": "b"}, {"id": 3, "name": None}],
                    bulk.arrow_type(ser.row_type))
    res = bulk.encode(rows, ser, on_error="skip")
    assert res.bad_rows == [1] and res.errors[0].field_path == "id"  # type: ignore[attr-defined]
    assert res.values.to_pylist() == [ser.to_bytes((1, "a")), ser.to_bytes((3, None))]


def test_arrow_returns_the_array_and_collect_is_deprecated() -> None:
    snap = OLD_ROW.snapshot_configuration()
    out = arrow.migrate(pa.array(GOOD), snap, NEW_ROW, threads=2)
    assert isinstance(out, pa.Array) and out.equals(bulk.migrate(pa.array(GOOD), snap, NEW_ROW).values)
    assert arrow.decode(_column(), OLD_ROW, on_error="null").equals(bulk.decode(_column(), OLD_ROW,
                                                                                on_error="null").values)
    assert len(arrow.decode(_column(), OLD_ROW, on_error="skip")) == 4
    with pytest.warns(DeprecationWarning, match="collect"):
        values, errors = arrow.decode(_column(), OLD_ROW, on_error="collect")
    want = bulk.decode(_column(), OLD_ROW, on_error="null")
    assert values.equals(want.values) and [e.row for e in errors] == want.bad_rows


class _MyInt(S.IntSerializer):
    pass


def test_capability_table_is_keyed_by_exact_classes() -> None:
    assert capabilities.codec(S.IntSerializer()) == capabilities.Codec("fixed", capabilities.abi.LEAF_I32, pa.int32())
    assert capabilities.codec(_MyInt()) is None  # a subclass may change the format: per value
    assert capabilities.codec(S.ListSerializer(S.IntSerializer())) is None
    assert all(isinstance(k, type) for k in capabilities.CODECS)
    assert all(isinstance(s, type) and isinstance(t, type) for s, t in capabilities.REMAPS)
    assert capabilities.migrates_with_kernel(OLD_ROW.snapshot_configuration(), NEW_ROW)
    assert not capabilities.migrates_with_kernel(S.IntSerializer().snapshot_configuration(), S.LongSerializer())
    assert bulk_migration_supported is capabilities.migrates_with_kernel  # the RocksDB backend asks the table


@dataclasses.dataclass
class Old:
    a: int | None = None
    b: str | None = None


@dataclasses.dataclass
class New:
    b: str | None = None
    a: int | None = None
    c: int | None = 7


OLD_POJO = S.PojoSerializer(Old, {"a": S.IntSerializer(), "b": S.StringSerializer()}, java_class_name="p.P")
NEW_POJO = S.PojoSerializer(New, {"b": S.StringSerializer(), "a": S.IntSerializer(), "c": S.IntSerializer()},
                            java_class_name="p.P")


def test_rocksdb_migrates_every_pair_the_table_has_a_kernel_for(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """A POJO migration (a kernel pair in the table) runs in bulk in the RocksDB backend, with the
    bytes of its per-entry path."""
    assert capabilities.migrates_with_kernel(OLD_POJO.snapshot_configuration(), NEW_POJO)
    b = HeapStateBackend(S.StringSerializer(), 128)
    v = b.get_state(ValueStateDescriptor("v", OLD_POJO))
    for i in range(50):
        b.set_current_key(f"k{i}")
        v.update(Old(i, f"s{i}" if i % 3 else None))
    b.savepoint(tmp_path / "sp")
    b.close()
    with RocksDBStateBackend.restore(tmp_path / "sp", bulk=False) as ref:
        ref.get_state(ValueStateDescriptor("v", NEW_POJO))
        want = list(ref._handles["v"].table.cf.items())

    def no_per_entry(*args: object) -> None:
        raise AssertionError("took the per-entry path")

    monkeypatch.setattr(RocksDBStateBackend, "_migrate_per_entry", no_per_entry)
    with RocksDBStateBackend.restore(tmp_path / "sp", migration_batch_rows=7) as r:
        s = r.get_state(ValueStateDescriptor("v", NEW_POJO))
        assert list(r._handles["v"].table.cf.items()) == want
        r.set_current_key("k4")
        assert s.value() == New("s4", 4, 7)
