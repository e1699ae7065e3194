"""Damaged, partial and hostile savepoints: every defect is a typed error naming the file or the
state and row, nothing crashes or allocates wildly, and the source savepoint is never modified."""

import base64
import hashlib
import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from statemorph.errors import ExitCode, SavepointError, StateFormatError, UnsupportedStateError
from statemorph.savepoint import METADATA_FILE, SavepointWriter, read_metadata, read_state_table, verify_savepoint
from statemorph.savepoint.parquet import reader as reader_mod
from statemorph.serializers import IntSerializer, LongSerializer, StringSerializer
from statemorph.state import (
    EmbeddedRocksDBStateBackend,
    HashMapStateBackend,
    ListStateDescriptor,
    MapStateDescriptor,
    ValueStateDescriptor,
)

S, I, L = StringSerializer(), IntSerializer(), LongSerializer()
BACKENDS = [HashMapStateBackend, EmbeddedRocksDBStateBackend]


def tree(path):
    return {p.relative_to(path).as_posix(): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()}


@pytest.fixture
def good(tmp_path):
    b = HashMapStateBackend(S, 128)
    v = b.get_state(ValueStateDescriptor("v", L))
    lst = b.get_state(ListStateDescriptor("l", S))
    for i in range(20):
        b.set_current_key(f"k{i}")
        v.update(i)
        lst.add_all(["a", "b"])
    sp = tmp_path / "good"
    b.savepoint(sp)
    return sp


def rewrite_meta(sp, fn):
    doc = json.loads((sp / METADATA_FILE).read_text())
    fn(doc)
    (sp / METADATA_FILE).write_text(json.dumps(doc))


def restore_fails(sp, match, cls=HashMapStateBackend, **kw):
    before = tree(sp)
    with pytest.raises(SavepointError, match=match):
        cls.restore(sp, **kw)
    assert tree(sp) == before, "restore changed the source savepoint"


@pytest.mark.parametrize("cls", BACKENDS)
def test_missing_metadata(good, cls):
    (good / METADATA_FILE).unlink()
    restore_fails(good, "missing", cls)


def test_missing_directory(tmp_path):
    with pytest.raises(SavepointError, match="does not exist"):
        read_metadata(tmp_path / "nope")


@pytest.mark.parametrize("cut", [0, 1, 50, -10])
def test_truncated_metadata(good, cut):
    data = (good / METADATA_FILE).read_bytes()
    (good / METADATA_FILE).write_bytes(data[:cut])
    restore_fails(good, "_metadata.json")


@pytest.mark.parametrize("cls", BACKENDS)
def test_flipped_byte_in_a_data_file(good, cls):
    part = good / "state-00000" / "part-00000.parquet"
    data = bytearray(part.read_bytes())
    data[len(data) // 2] ^= 0x40
    part.write_bytes(bytes(data))
    restore_fails(good, r"part-00000.parquet: sha256 .* \(damaged\)", cls)


@pytest.mark.parametrize("cls", BACKENDS)
def test_truncated_and_missing_data_files(good, cls):
    part = good / "state-00001" / "part-00000.parquet"
    part.write_bytes(part.read_bytes()[:-20])
    restore_fails(good, "state-00001/part-00000.parquet: size", cls)
    part.unlink()
    restore_fails(good, "state-00001/part-00000.parquet: file listed in _metadata.json is missing", cls)


@pytest.mark.parametrize("path", ["../evil.parquet", "/etc/passwd", "state-00000/../../x", "state-00000//a",
                                  "other/part.parquet"])
def test_paths_escaping_the_savepoint_are_rejected(good, path):
    rewrite_meta(good, lambda d: d["states"][0]["files"][0].__setitem__("path", path))
    restore_fails(good, "path|outside")


@pytest.mark.parametrize("field,value,match", [
    ("format_version", 99, "format version 99"),
    ("format", "flink", "format"),
    ("max_parallelism", 0, "max_parallelism"),
    ("max_parallelism", "128", "wrong type"),
    ("key_serializer", "***", "base64"),
    ("states", {}, "wrong type"),
])
def test_bad_top_level_fields(good, field, value, match):
    rewrite_meta(good, lambda d: d.__setitem__(field, value))
    restore_fails(good, match)


@pytest.mark.parametrize("mutate,match", [
    (lambda s: s.__setitem__("kind", "set"), "unknown state kind"),
    (lambda s: s.pop("value_serializer"), "missing field 'value_serializer'"),
    (lambda s: s.__setitem__("rows", 12345), "rows 12345"),
    (lambda s: s["files"][0].__setitem__("sha256", "00" * 32), "sha256"),
    (lambda s: s["files"][0].__setitem__("sha256", "xyz"), "64 lowercase hex"),
    (lambda s: s["files"][0].__setitem__("rows", -1), "negative"),
])
def test_bad_state_fields(good, mutate, match):
    rewrite_meta(good, lambda d: mutate(d["states"][0]))
    restore_fails(good, match)


def test_unknown_snapshot_identifier_names_state_and_role(good):
    from statemorph.io import DataOutputSerializer

    out = DataOutputSerializer()
    out.write_utf("com.example.NotRegistered$Snapshot")
    out.write_int(1)
    blob = base64.b64encode(out.get_copy_of_buffer()).decode()
    rewrite_meta(good, lambda d: d["states"][1].__setitem__("value_serializer", blob))
    # an unknown class is no damage: unsupported (exit 7), naming the state, the role and the class
    before = tree(good)
    with pytest.raises(UnsupportedStateError, match=r"state 'l': unsupported state: its value serializer is "
                                                    r"RAW\('com.example.NotRegistered\$Snapshot'\)") as e:
        HashMapStateBackend.restore(good)
    assert e.value.exit_code == ExitCode.UNSUPPORTED and tree(good) == before


def test_oversized_metadata_is_rejected_before_parsing(good, monkeypatch):
    monkeypatch.setattr(reader_mod, "MAX_METADATA_BYTES", 100)
    restore_fails(good, "exceeds")


def crafted(tmp_path, kind, rows, **sers):
    """A savepoint with consistent checksums whose rows are hostile."""
    sp = tmp_path / f"crafted-{kind}"
    with SavepointWriter(sp, max_parallelism=128, key_serializer=S) as w:
        w.add_state("x", kind, **sers).write_rows(rows)
    return sp


K = S.to_bytes("k")  # key group of "k" is irrelevant for loading: rows carry their group


@pytest.mark.parametrize("cls", BACKENDS)
def test_duplicate_value_entries(tmp_path, cls):
    sp = crafted(tmp_path, "value", [(1, K, b"\x00", L.to_bytes(1)), (1, K, b"\x00", L.to_bytes(2))],
                 value_serializer=L)
    restore_fails(sp, "duplicate", cls)


@pytest.mark.parametrize("cls", BACKENDS)
@pytest.mark.parametrize("indices", [[0, 0], [0, 2], [1], [-1]])
def test_bad_list_indices(tmp_path, cls, indices):
    rows = [(1, K, b"\x00", i, S.to_bytes("e")) for i in indices]
    sp = crafted(tmp_path, "list", rows, value_serializer=S)
    restore_fails(sp, "index|indices", cls)


def test_garbage_value_bytes_on_heap_name_state_and_row(tmp_path):
    # a string claiming 2**31 characters: must fail on the length check, not allocate
    rows = [(1, K, b"\x00", S.to_bytes("ok")), (2, S.to_bytes("k2"), b"\x00", b"\xff\xff\xff\xff\x07")]
    sp = crafted(tmp_path, "value", rows, value_serializer=S)
    restore_fails(sp, r"state 'x', row 1 .*cannot be restored")


def test_garbage_value_bytes_on_rocksdb_fail_typed_on_access(tmp_path):
    key = "user-1"
    kg = 121  # Flink's key group of "user-1" at max_parallelism 128
    sp = crafted(tmp_path, "value", [(kg, S.to_bytes(key), b"\x00", b"\x00\x00\x00")], value_serializer=L)
    before = tree(sp)
    with EmbeddedRocksDBStateBackend.restore(sp) as r:  # bytes are loaded, not parsed
        v = r.get_state(ValueStateDescriptor("x", L))
        r.set_current_key(key)
        with pytest.raises(StateFormatError, match="truncated"):
            v.value()
    assert tree(sp) == before


def test_wrong_parquet_schema_with_valid_checksum(good):
    part = good / "state-00000" / "part-00000.parquet"
    pq.write_table(pa.table({"a": [1]}), part)
    digest = hashlib.sha256(part.read_bytes()).hexdigest()
    size = part.stat().st_size

    def fix(d):
        d["states"][0]["files"][0].update(sha256=digest, size=size)

    rewrite_meta(good, fix)
    with pytest.raises(SavepointError, match="do not match"):
        verify_savepoint(good)
    with pytest.raises(SavepointError, match="do not match"):
        read_state_table(good, "v")


def test_not_parquet_with_valid_checksum(good):
    part = good / "state-00000" / "part-00000.parquet"
    part.write_bytes(b"this is not parquet")
    rewrite_meta(good, lambda d: d["states"][0]["files"][0].update(
        sha256=hashlib.sha256(b"this is not parquet").hexdigest(), size=19))
    restore_fails(good, "not a readable Parquet file")


def test_key_group_out_of_range_in_data(tmp_path):
    sp = crafted(tmp_path, "value", [(1, K, b"\x00", L.to_bytes(1))], value_serializer=L)
    rewrite_meta(sp, lambda d: d.__setitem__("max_parallelism", 1))
    restore_fails(sp, "key group out of range")


def test_map_state_requires_user_key_serializer(tmp_path):
    sp = crafted(tmp_path, "map", [(1, K, b"\x00", I.to_bytes(1), None)], value_serializer=L,
                 user_key_serializer=I)
    rewrite_meta(sp, lambda d: d["states"][0].pop("user_key_serializer"))
    restore_fails(sp, "user_key_serializer")


def test_map_state_loads_on_both_backends_and_roundtrips(tmp_path):
    sp = crafted(tmp_path, "map", [(121, S.to_bytes("user-1"), b"\x00", I.to_bytes(1), None),
                                   (121, S.to_bytes("user-1"), b"\x00", I.to_bytes(2), L.to_bytes(5))],
                 value_serializer=L, user_key_serializer=I)
    for cls in BACKENDS:
        with cls.restore(sp) as r:
            m = r.get_state(MapStateDescriptor("x", I, L))
            r.set_current_key("user-1")
            assert sorted(m.items(), key=lambda kv: kv[0]) == [(1, None), (2, 5)]


def test_deeply_nested_metadata_json(good):
    (good / METADATA_FILE).write_text("[" * 100000)
    restore_fails(good, "not valid JSON")


@pytest.mark.parametrize("cls", BACKENDS)
def test_nulls_in_non_nullable_columns(tmp_path, good, cls):
    part = good / "state-00000" / "part-00000.parquet"
    t = pq.read_table(part)
    keys = t.column("key").to_pylist()
    keys[3] = None
    nullable = pa.schema([f.with_nullable(True) for f in t.schema])
    pq.write_table(pa.Table.from_arrays([t.column(0), pa.array(keys, pa.binary()), t.column(2), t.column(3)],
                                        schema=nullable), part)
    data = part.read_bytes()
    rewrite_meta(good, lambda d: d["states"][0]["files"][0].update(sha256=hashlib.sha256(data).hexdigest(),
                                                                   size=len(data)))
    restore_fails(good, "column 'key' has 1 nulls", cls)


@pytest.mark.parametrize("precreate", [False, True])
def test_failed_rocksdb_restore_leaves_no_database(good, tmp_path, precreate):
    (good / "state-00001" / "part-00000.parquet").write_bytes(b"junk")
    db = tmp_path / "db"
    if precreate:
        db.mkdir()
    restore_fails(good, "size", EmbeddedRocksDBStateBackend, db_path=db)
    assert (db.exists() and list(db.iterdir()) == []) if precreate else not db.exists()


@pytest.mark.parametrize(("version", "state", "match"), [
    (1, 1, "need format version 2"),  # whole-value rows exist only in converted (version 2) savepoints
    (2, 0, "only for list state"),  # 'v' is value state
])
def test_value_bytes_flag_only_on_converted_list_states(good, version, state, match):
    def mark(d):
        d["format_version"] = version
        d["states"][state]["value_bytes"] = True

    rewrite_meta(good, mark)
    with pytest.raises(SavepointError, match=match):
        read_metadata(good)


@pytest.mark.parametrize(("version", "state", "match"), [
    (1, 0, "need format version 2"),  # whole-key rows exist only in converted (version 2) savepoints
    (2, 0, "only for map state"),  # 'v' is value state
    (2, 1, "only for map state"),  # 'l' is list state
])
def test_key_bytes_flag_only_on_converted_map_states(good, version, state, match):
    def mark(d):
        d["format_version"] = version
        d["states"][state]["key_bytes"] = True

    rewrite_meta(good, mark)
    with pytest.raises(SavepointError, match=match):
        read_metadata(good)
