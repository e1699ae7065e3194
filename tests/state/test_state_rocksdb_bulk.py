"""The RocksDB backend's bulk paths (restore through SST files, migration through
``statemorph.bulk.migrate`` for the pairs the capability table has a kernel for, column-wise
savepoint export) against its per-entry reference path: same stored bytes, same savepoint rows,
same errors, chunk boundaries anywhere."""

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from statemorph.errors import SavepointError, StateMigrationError
from statemorph.savepoint import SavepointWriter, read_state_table
from statemorph.serializers import IntSerializer, LongSerializer, RowDataSerializer, StringSerializer
from statemorph.state import (
    EmbeddedRocksDBStateBackend,
    HashMapStateBackend,
    ListStateDescriptor,
    MapStateDescriptor,
    ValueStateDescriptor,
)
from statemorph.state import rocksdb_bulk as bulk
from statemorph.state.rocksdb import bulk_migration_supported, write_variable_int_bytes

OLD = "ROW<id BIGINT, meta ROW<user INT, ts BIGINT, device STRING>>"
NEW = "ROW<id BIGINT, meta ROW<device STRING, location STRING, user INT, ts BIGINT>>"


# -- column helpers ---------------------------------------------------------------------------------

@settings(max_examples=60, deadline=None)
@given(st.lists(st.one_of(st.none(), st.binary(max_size=8)), max_size=12),
       st.integers(-10, 10), st.one_of(st.none(), st.integers(-10, 10)))
def test_slice_binary_is_python_slicing(values, start, stop):
    got = bulk.slice_binary(pa.array(values, pa.binary()), start, stop).to_pylist()
    assert got == [None if v is None else v[start:stop] for v in values]


@given(st.lists(st.integers(0, (1 << 31) - 1), max_size=20))
def test_variable_int_bytes_match_flink_form(lengths):
    got = bulk.variable_int_bytes(np.array(lengths, dtype=np.int64)).to_pylist()
    assert got == [write_variable_int_bytes(n) for n in lengths]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 999), st.binary(max_size=300), st.binary(max_size=5),
                          st.binary(min_size=1, max_size=4)), min_size=1, max_size=15),
       st.sampled_from([1, 2]), st.booleans(), st.booleans())
def test_composite_keys_match_the_per_entry_layout(rows, prefix, ambiguous, with_user_key):
    kg, k, n, uk = (list(c) for c in zip(*rows, strict=True))
    kg = [g % (1 << (8 * prefix)) for g in kg]
    got = bulk.composite_keys(pa.array(kg, pa.int32()), pa.array(k, pa.binary()), pa.array(n, pa.binary()),
                              prefix_bytes=prefix, ambiguous=ambiguous,
                              user_keys=pa.array(uk, pa.binary()) if with_user_key else None).to_pylist()
    for g, kb, nb, u, ck in zip(kg, k, n, uk, got, strict=True):
        parts = [g.to_bytes(prefix, "big"), kb]
        if ambiguous:
            parts.append(write_variable_int_bytes(len(kb)))
        parts.append(nb)
        if ambiguous:
            parts.append(write_variable_int_bytes(len(nb)))
        if with_user_key:
            parts.append(u)
        assert ck == b"".join(parts)


@given(st.lists(st.one_of(st.none(), st.binary(max_size=6)), max_size=12))
def test_map_values_round_trip(values):
    stored = bulk.encode_map_values(pa.array(values, pa.binary()))
    assert stored.to_pylist() == [b"\x01" if v is None else b"\x00" + v for v in values]
    back, bad = bulk.decode_map_values(stored)
    assert back.to_pylist() == values and bad == -1


def test_decode_map_values_names_the_first_bad_flag():
    _, bad = bulk.decode_map_values(pa.array([b"\x00a", b"\x01", b"", b"\x07"], pa.binary()))
    assert bad == 2


def test_big_endian_fixed_rejects_out_of_range():
    with pytest.raises(ValueError):
        bulk.big_endian_fixed(np.array([256]), 1)
    assert bulk.big_endian_fixed(np.array([1, 258]), 2).to_pylist() == [b"\x00\x01", b"\x01\x02"]


# -- whole backend: bulk vs per entry ---------------------------------------------------------------

def dump(backend):
    """Every column family's (key, value) pairs, by state name."""
    return {name: list(h.table.cf.items()) for name, h in backend._handles.items()}


def build_savepoint(tmp_path, n=120, key_ser=None, ns_ser=None, max_par=128, name="sp", **sp_kwargs):
    key_ser = key_ser or StringSerializer()
    b = HashMapStateBackend(key_ser, max_par)
    kw = {"namespace_serializer": ns_ser} if ns_ser is not None else {}
    v = b.get_state(ValueStateDescriptor("v", RowDataSerializer(OLD)), **kw)
    lst = b.get_state(ListStateDescriptor("l", IntSerializer()), **kw)
    m = b.get_state(MapStateDescriptor("m", IntSerializer(), RowDataSerializer(OLD)), **kw)
    for i in range(n):
        b.set_current_key(f"user-{i}" if isinstance(key_ser, StringSerializer) else i)
        for s in (v, lst, m):
            if ns_ser is not None:
                s.set_current_namespace(f"ns-{i % 3}")
        v.update((i, (i % 7, 1_700_000_000_000 + i, f"dev-{i}")))
        lst.add_all([i, i + 1, i + 2][: i % 4])
        m.put(1, (i, (i, i, None)))
        m.put(2, None)
    sp = tmp_path / name
    b.savepoint(sp, **sp_kwargs)
    b.close()
    return sp


CASES = {
    "string-key": {},
    "long-key-2-byte-prefix": {"key_ser": LongSerializer(), "max_par": 1000},
    "ambiguous-namespace": {"ns_ser": StringSerializer()},
}


@pytest.mark.parametrize("case", CASES)
def test_bulk_restore_and_savepoint_equal_per_entry(tmp_path, case):
    sp = build_savepoint(tmp_path, **CASES[case])
    with (EmbeddedRocksDBStateBackend.restore(sp, bulk=True) as a,
          EmbeddedRocksDBStateBackend.restore(sp, bulk=False) as b):
        assert dump(a) == dump(b)
        a.savepoint(tmp_path / "a")
        b.savepoint(tmp_path / "b")
    for state in ("v", "l", "m"):
        assert read_state_table(tmp_path / "a", state).equals(read_state_table(tmp_path / "b", state))
        assert read_state_table(tmp_path / "a", state).num_rows == read_state_table(sp, state).num_rows


@pytest.mark.parametrize("batch_rows", [1, 7, 64, 65536])
def test_bulk_savepoint_chunk_boundaries(tmp_path, batch_rows):
    sp = build_savepoint(tmp_path, n=50)
    with EmbeddedRocksDBStateBackend.restore(sp) as a, EmbeddedRocksDBStateBackend.restore(sp, bulk=False) as b:
        a.savepoint(tmp_path / "a", batch_rows=batch_rows)
        b.savepoint(tmp_path / "b", batch_rows=batch_rows)
    for state in ("v", "l", "m"):
        assert read_state_table(tmp_path / "a", state).equals(read_state_table(tmp_path / "b", state))


def test_restore_of_unsorted_files_in_many_chunks(tmp_path):
    """Rows in no particular order, one small file each: overlapping SST files still give every entry."""
    sp = build_savepoint(tmp_path, n=200, rows_per_file=17)
    with EmbeddedRocksDBStateBackend.restore(sp) as a, EmbeddedRocksDBStateBackend.restore(sp, bulk=False) as b:
        assert dump(a) == dump(b)
        v = a.get_state(ValueStateDescriptor("v", RowDataSerializer(OLD)))
        a.set_current_key("user-123")
        assert v.value() == (123, (123 % 7, 1_700_000_000_123, "dev-123"))


def value_savepoint(tmp_path, rows, name="dup"):
    with SavepointWriter(tmp_path / name, max_parallelism=128, key_serializer=StringSerializer(),
                         rows_per_file=2) as w:
        w.add_state("v", "value", value_serializer=IntSerializer()).write_rows(rows)
    return tmp_path / name


@pytest.mark.parametrize("bulk_mode", [True, False])
@pytest.mark.parametrize("rows", [
    [(1, b"\x01a", b"\x00", b"\x00\x00\x00\x01"), (1, b"\x01a", b"\x00", b"\x00\x00\x00\x02")],  # same file
    [(1, b"\x01a", b"\x00", b"\x00\x00\x00\x01"), (2, b"\x01b", b"\x00", b"\x00\x00\x00\x02"),
     (1, b"\x01a", b"\x00", b"\x00\x00\x00\x03")],  # in different files, out of order
])
def test_duplicate_entries_fail_restore_in_both_paths(tmp_path, rows, bulk_mode):
    sp = value_savepoint(tmp_path, rows)
    with pytest.raises(SavepointError, match="duplicate"):
        EmbeddedRocksDBStateBackend.restore(sp, db_path=tmp_path / "db", bulk=bulk_mode)
    assert not any((tmp_path / "db").iterdir()) if (tmp_path / "db").exists() else True


# -- migration ---------------------------------------------------------------------------------------

def test_bulk_migration_is_chosen_by_the_capability_table():
    old = RowDataSerializer(OLD).snapshot_configuration()
    assert bulk_migration_supported(old, RowDataSerializer(NEW))
    assert not bulk_migration_supported(IntSerializer().snapshot_configuration(), LongSerializer())


@pytest.mark.parametrize("chunk", [1, 7, 50, 65536])
def test_bulk_migration_equals_per_entry(tmp_path, chunk):
    sp = build_savepoint(tmp_path, n=60)
    opts = {"migration_batch_rows": chunk}
    with EmbeddedRocksDBStateBackend.restore(sp, **opts) as a, \
            EmbeddedRocksDBStateBackend.restore(sp, bulk=False, **opts) as b:
        for r in (a, b):
            r.get_state(ValueStateDescriptor("v", RowDataSerializer(NEW)))
            r.get_state(MapStateDescriptor("m", IntSerializer(), RowDataSerializer(NEW)))
        assert dump(a) == dump(b)
        v = a.get_state(ValueStateDescriptor("v", RowDataSerializer(NEW)))
        m = a.get_state(MapStateDescriptor("m", IntSerializer(), RowDataSerializer(NEW)))
        a.set_current_key("user-42")
        assert v.value() == (42, ("dev-42", None, 0, 1_700_000_000_042))
        assert m.get(1) == (42, (None, None, 42, 42)) and m.contains(2) and m.get(2) is None
        assert len(a._db.list_cf(str(a.db_path))) == len(b._db.list_cf(str(b.db_path)))
        assert not [p for p in a.db_path.iterdir() if p.name.startswith(".sst-")]


def corrupt_savepoint(tmp_path, bad_positions, n=30):
    """A RowData value state whose entries at ``bad_positions`` (in key order) are truncated."""
    ser = RowDataSerializer(OLD)
    keys = sorted(StringSerializer().to_bytes(f"user-{i:03d}") for i in range(n))
    rows = []
    for pos, kb in enumerate(keys):
        value = ser.to_bytes((pos, (pos, pos, "d")))
        rows.append((0, kb, b"\x00", value[:5] if pos in bad_positions else value))
    with SavepointWriter(tmp_path / "bad", max_parallelism=128, key_serializer=StringSerializer()) as w:
        w.add_state("v", "value", value_serializer=ser).write_rows(rows)
    return tmp_path / "bad", keys


@pytest.mark.parametrize("bad", [[0], [6], [7], [13, 20], [29]])
@pytest.mark.parametrize("chunk", [7, 1000])
def test_bulk_migration_failure_part_way_names_first_bad_entry_and_changes_nothing(tmp_path, bad, chunk):
    sp, keys = corrupt_savepoint(tmp_path, set(bad))
    with EmbeddedRocksDBStateBackend.restore(sp, key_hasher=lambda k: 0, migration_batch_rows=chunk) as r, \
            EmbeddedRocksDBStateBackend.restore(sp, key_hasher=lambda k: 0, bulk=False) as ref:
        before = dump(r)
        cfs = sorted(r._db.list_cf(str(r.db_path)))
        errors = []
        for backend in (r, ref):
            with pytest.raises(StateMigrationError) as e:
                backend.get_state(ValueStateDescriptor("v", RowDataSerializer(NEW)))
            errors.append(str(e.value))
        first = StringSerializer().from_bytes(keys[bad[0]])
        assert "'v'" in errors[0] and repr(first) in errors[0] and "left unchanged" in errors[0]
        assert errors[0] == errors[1]
        assert dump(r) == before
        assert sorted(r._db.list_cf(str(r.db_path))) == cfs
        assert not [p for p in r.db_path.iterdir() if p.name.startswith(".sst-")]
        r.savepoint(tmp_path / "again")
    assert read_state_table(tmp_path / "again", "v").equals(read_state_table(sp, "v"))


def test_map_state_with_bad_null_flag_fails_migration_naming_the_entry(tmp_path):
    sp = build_savepoint(tmp_path, n=10)
    with EmbeddedRocksDBStateBackend.restore(sp) as r:
        cf = r._handles["m"].table.cf
        victim = next(iter(cf.keys()))
        cf[victim] = b"\x07garbage"
        with pytest.raises(StateMigrationError, match="'m'.*map key 1"):
            r.get_state(MapStateDescriptor("m", IntSerializer(), RowDataSerializer(NEW)))
        assert cf[victim] == b"\x07garbage"


def test_bulk_restore_of_a_key_group_range_equals_per_entry(tmp_path):
    sp = build_savepoint(tmp_path, n=150, max_par=1000)
    with EmbeddedRocksDBStateBackend.restore(sp, key_group_range=(100, 499)) as a, \
            EmbeddedRocksDBStateBackend.restore(sp, key_group_range=(100, 499), bulk=False) as b:
        stored = dump(a)
        assert stored == dump(b)
        assert stored["v"] and all(100 <= int.from_bytes(k[:2], "big") <= 499 for k, _ in stored["v"])
