"""Hostile Parquet-form savepoints (issue 16): nothing changes silently, nothing outside the
savepoint is read or described, nothing that is not a regular file is opened, and no size from
metadata is trusted before it is compared with the real file. Real files, real Parquet."""

from __future__ import annotations

import hashlib
import json
import os
import socket
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from processes import child_env

from statemorph import serializers as S
from statemorph.engine import check_savepoint, migrate_savepoint
from statemorph.engine.keys import key_groups
from statemorph.errors import IncompatibleSchemaError, SavepointError, UnsafeFileError
from statemorph.io import DataOutputSerializer
from statemorph.savepoint import METADATA_FILE, SavepointWriter, read_state_table, verify_savepoint
from statemorph.state import ValueStateDescriptor

L = S.LongSerializer()
OLD = S.RowDataSerializer("ROW<a INT, b STRING>")
NEW = S.RowDataSerializer("ROW<b STRING, a INT, c BIGINT>")  # reordered and added: compatible after migration


def build(path: Path, rows: int = 40, rows_per_file: int = 10) -> Path:
    keys = list(range(rows))
    with SavepointWriter(path, max_parallelism=128, key_serializer=L, rows_per_file=rows_per_file) as w:
        w.write_state("v", "value", pa.table({
            "key_group": key_groups(pa.array(keys, pa.int64()), L, 128),
            "key": pa.array([L.to_bytes(k) for k in keys], pa.binary()),
            "namespace": pa.array([b"\x00"] * rows, pa.binary()),
            "value": pa.array([OLD.to_bytes((k, f"v{k}")) for k in keys], pa.binary())}), value_serializer=OLD)
    return path


def tree(path: Path) -> dict[str, bytes]:
    return {p.relative_to(path).as_posix(): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()}


def edit_meta(sp: Path, fn) -> None:
    doc = json.loads((sp / METADATA_FILE).read_text())
    fn(doc)
    (sp / METADATA_FILE).write_text(json.dumps(doc))


def file_entry(sp: Path, i: int = 0) -> dict:
    return json.loads((sp / METADATA_FILE).read_text())["states"][0]["files"][i]


MIGRATE = [ValueStateDescriptor("v", NEW)]  # the value column is rewritten


def refused_everywhere(sp: Path, tmp_path: Path, cls: type[Exception], match: str) -> str:
    """verify, read and migrate (data pass and copy pass) all refuse with ``cls``; the source is
    unchanged and no destination appears. Returns the message."""
    before = tree(sp) if not any(p.is_symlink() for p in sp.rglob("*")) else None
    with pytest.raises(cls, match=match) as e1:
        verify_savepoint(sp)
    with pytest.raises(cls, match=match):
        read_state_table(sp, "v")
    for name, descs in (("out-migrate", MIGRATE), ("out-copy", [])):
        with pytest.raises(cls, match=match):
            migrate_savepoint(sp, tmp_path / name, descs)
        assert not (tmp_path / name).exists()
        assert not [p for p in tmp_path.iterdir() if "statemorph-" in p.name], "leftovers of a failed run"
    if before is not None:
        assert tree(sp) == before
    return str(e1.value)


# -- silent data change ----------------------------------------------------------------------------

def test_a_file_listed_twice_is_refused(tmp_path):
    sp = build(tmp_path / "sp")

    def dup(doc):
        st = doc["states"][0]
        st["files"].append(dict(st["files"][0]))
        st["rows"] += st["files"][0]["rows"]

    edit_meta(sp, dup)
    refused_everywhere(sp, tmp_path, SavepointError, r"state 'v': files\[4\]: file 'state-00000/part-00000.parquet' "
                                                     r"is listed twice")


def test_the_same_file_under_two_names_is_refused(tmp_path):
    sp = build(tmp_path / "sp")
    part0 = sp / "state-00000" / "part-00000.parquet"
    alias = sp / "state-00000" / "part-00009.parquet"
    os.link(part0, alias)

    def alias_entry(doc):
        st = doc["states"][0]
        st["files"].append(dict(st["files"][0], path="state-00000/part-00009.parquet"))
        st["rows"] += st["files"][0]["rows"]

    edit_meta(sp, alias_entry)
    refused_everywhere(sp, tmp_path, UnsafeFileError, "part-00009.parquet: is the same file as .*part-00000.parquet")


@pytest.mark.parametrize("delta", [1, -1])
def test_a_row_count_mismatch_is_refused(tmp_path, delta):
    sp = build(tmp_path / "sp")

    def lie(doc):
        st = doc["states"][0]
        st["files"][1]["rows"] += delta
        st["rows"] += delta

    edit_meta(sp, lie)
    refused_everywhere(sp, tmp_path, SavepointError, r"part-00001.parquet:? (10 rows != \d+ recorded|has 10 rows, not)")


def _junk_snapshot() -> str:
    import base64

    return base64.b64encode(b"\x00\x03abc junk that is not a snapshot \xff\xfe").decode()


def test_a_garbage_key_serializer_snapshot_of_the_savepoint_is_refused(tmp_path):
    sp = build(tmp_path / "sp")
    edit_meta(sp, lambda d: d.__setitem__("key_serializer", _junk_snapshot()))
    match = r"and the key .*\nthe key serializer snapshot in .*_metadata.json cannot be read"
    for descs in (MIGRATE, []):
        with pytest.raises(IncompatibleSchemaError, match=match):
            migrate_savepoint(sp, tmp_path / "out", descs)
        assert not (tmp_path / "out").exists()
    plan = check_savepoint(sp, MIGRATE)
    assert not plan.is_compatible and "key serializer snapshot" in plan.summary


def _rewritten_snapshot(out: Path, role: str) -> str:
    states: list[dict[str, str]] = json.loads((out / METADATA_FILE).read_text(encoding="utf-8"))["states"]
    return states[0][role]


def test_a_state_key_snapshot_of_an_unknown_class_is_carried(tmp_path):
    """A state's key snapshot of a class statemorph does not know (``abc``) is an opaque state's
    (issue 20): the value still migrates (its serializer is known) and a plain rewrite carries the
    state; the unknown snapshot is written back byte for byte both times."""
    sp = build(tmp_path / "sp")
    edit_meta(sp, lambda d: d["states"][0].__setitem__("key_serializer", _junk_snapshot()))
    for k, descs in enumerate((MIGRATE, [])):
        migrate_savepoint(sp, tmp_path / f"out{k}", descs)
        assert _rewritten_snapshot(tmp_path / f"out{k}", "key_serializer") == _junk_snapshot()


def test_a_value_snapshot_of_an_unknown_class_is_carried_but_not_migrated(tmp_path):
    sp = build(tmp_path / "sp")
    out = DataOutputSerializer()
    out.write_utf("com.example.Junk")
    out.write_int(1)
    import base64

    junk = base64.b64encode(out.get_copy_of_buffer()).decode()
    edit_meta(sp, lambda d: d["states"][0].__setitem__("value_serializer", junk))
    with pytest.raises(IncompatibleSchemaError, match="state 'v'.*unsupported state.*RAW\\('com.example.Junk'\\)"):
        migrate_savepoint(sp, tmp_path / "migrated", MIGRATE)
    assert not (tmp_path / "migrated").exists()
    migrate_savepoint(sp, tmp_path / "out", [])
    assert _rewritten_snapshot(tmp_path / "out", "value_serializer") == junk


def _flip_in_last_page(part: Path) -> None:
    md = pq.ParquetFile(part).metadata
    col = md.row_group(0).column(md.num_columns - 1)  # the value column
    end = (col.dictionary_page_offset or col.data_page_offset) + col.total_compressed_size
    data = bytearray(part.read_bytes())
    data[end - 2] ^= 0x01  # inside the page payload, not its header
    part.write_bytes(bytes(data))


def test_page_checksums_are_written_and_verified(tmp_path):
    """sha256 in the metadata can be recomputed by whoever edits the file; the page CRCs inside
    the Parquet file still catch a flipped byte (corruption, not tampering: see docs/reliability.md)."""
    sp = build(tmp_path / "sp")
    part = sp / "state-00000" / "part-00002.parquet"
    _flip_in_last_page(part)
    data = part.read_bytes()
    edit_meta(sp, lambda d: d["states"][0]["files"][2].update(sha256=hashlib.sha256(data).hexdigest(),
                                                                size=len(data)))
    with pytest.raises(SavepointError, match="part-00002.parquet: cannot be read: .*(CRC|checksum)"):
        read_state_table(sp, "v")
    with pytest.raises(SavepointError, match="(CRC|checksum)"):
        migrate_savepoint(sp, tmp_path / "out", MIGRATE)
    assert not (tmp_path / "out").exists()


# -- only regular files inside the savepoint ---------------------------------------------------------

def _replace_part(sp: Path, make) -> Path:
    part = sp / "state-00000" / "part-00001.parquet"
    part.unlink()
    make(part)
    return part


def test_a_symlink_to_dev_zero_with_a_huge_size_is_refused_before_reading(tmp_path):
    sp = build(tmp_path / "sp")
    _replace_part(sp, lambda p: p.symlink_to("/dev/zero"))
    edit_meta(sp, lambda d: d["states"][0]["files"][1].update(size=10**9))
    refused_everywhere(sp, tmp_path, UnsafeFileError, "part-00001.parquet: leads out of the savepoint")


def test_a_device_node_inside_the_savepoint_is_refused(tmp_path):
    sp = build(tmp_path / "sp")
    try:
        _replace_part(sp, lambda p: os.mknod(p, stat.S_IFCHR | 0o600, os.makedev(1, 5)))  # /dev/zero
    except PermissionError:
        pytest.skip("creating a device node needs CAP_MKNOD")
    refused_everywhere(sp, tmp_path, UnsafeFileError, "part-00001.parquet: is a device, not a regular file")


def test_a_socket_is_refused(tmp_path):
    sp = build(tmp_path / "sp")
    s = socket.socket(socket.AF_UNIX)
    try:
        _replace_part(sp, lambda p: s.bind(str(p)))
        refused_everywhere(sp, tmp_path, UnsafeFileError, "part-00001.parquet: is a socket")
    finally:
        s.close()


def test_a_directory_in_place_of_a_file_is_refused(tmp_path):
    sp = build(tmp_path / "sp")
    _replace_part(sp, lambda p: p.mkdir())
    refused_everywhere(sp, tmp_path, UnsafeFileError, "part-00001.parquet: is a directory")


FIFO_PROBE = textwrap.dedent("""
    import sys
    from statemorph.engine import migrate_savepoint
    from statemorph.errors import UnsafeFileError
    from statemorph.savepoint import verify_savepoint
    for call in (lambda: verify_savepoint(sys.argv[1]), lambda: migrate_savepoint(sys.argv[1], sys.argv[2], [])):
        try:
            call()
        except UnsafeFileError as e:
            print("refused:", e)
""")


@pytest.mark.parametrize("which", ["part", "metadata"])
def test_a_fifo_is_refused_without_waiting(tmp_path, which):
    """Run in a child so that a regression hangs the child (killed by the guard), not the suite."""
    sp = build(tmp_path / "sp")
    if which == "part":
        _replace_part(sp, os.mkfifo)
        label = "part-00001.parquet"
    else:
        (sp / METADATA_FILE).unlink()
        os.mkfifo(sp / METADATA_FILE)
        label = METADATA_FILE
    p = subprocess.run([sys.executable, "-c", FIFO_PROBE, str(sp), str(tmp_path / "out")], capture_output=True,
                       text=True, env=child_env(), timeout=120)
    lines = p.stdout.splitlines()
    assert p.returncode == 0, p.stderr
    assert len(lines) == 2 and all(f"{label}: is a FIFO, not a regular file" in ln for ln in lines), lines
    assert not (tmp_path / "out").exists()


def test_a_symlink_to_an_outside_file_reveals_nothing_about_it(tmp_path):
    sp = build(tmp_path / "sp")
    secret = tmp_path / "secret.parquet"
    secret.write_bytes(os.urandom(1234))
    digest = hashlib.sha256(secret.read_bytes()).hexdigest()
    _replace_part(sp, lambda p: p.symlink_to(secret))
    for size, sha in ((1234, digest), (99, "0" * 64)):
        edit_meta(sp, lambda d, size=size, sha=sha: d["states"][0]["files"][1].update(size=size, sha256=sha))
        msg = refused_everywhere(sp, tmp_path, UnsafeFileError, "leads out of the savepoint")
        assert "1234" not in msg and digest not in msg and str(secret) not in msg


def test_a_state_directory_that_is_a_symlink_out_of_the_savepoint_is_refused(tmp_path):
    sp = build(tmp_path / "sp")
    outside = tmp_path / "elsewhere"
    (sp / "state-00000").rename(outside)  # same files, same checksums: only the location is wrong
    (sp / "state-00000").symlink_to(outside)
    msg = refused_everywhere(sp, tmp_path, UnsafeFileError, "state-00000/part-00000.parquet: leads out of the "
                                                            "savepoint")
    assert str(outside) not in msg and "sha256" not in msg


def test_a_symlink_inside_the_savepoint_is_followed(tmp_path):
    """Containment is what matters: a symlink that stays inside reads like the file."""
    sp = build(tmp_path / "sp")
    part = sp / "state-00000" / "part-00001.parquet"
    part.rename(sp / "moved.parquet")
    part.symlink_to(Path("..") / "moved.parquet")
    assert read_state_table(sp, "v").num_rows == 40


# -- sizes and counts from metadata ------------------------------------------------------------------

@pytest.mark.parametrize("field,value,cls,match", [
    ("size", 10**30, SavepointError, "out of range"),
    ("size", 2**63, SavepointError, "out of range"),
    ("rows", 2**63, SavepointError, "out of range"),
    ("size", 2**62, SavepointError, r"part-00000.parquet: size \d+ != 4611686018427387904 recorded"),
    ("size", 1e12, SavepointError, "'size' has the wrong type"),
    ("size", 10**12, SavepointError, r"size \d+ != 1000000000000 recorded"),
])
def test_hostile_sizes_are_typed_errors_not_allocations(tmp_path, field, value, cls, match):
    sp = build(tmp_path / "sp")

    def set_field(doc):
        st = doc["states"][0]
        st["files"][0][field] = value
        st.pop("rows")

    edit_meta(sp, set_field)
    refused_everywhere(sp, tmp_path, cls, match)


def test_a_truncated_file_is_refused_before_reading(tmp_path):
    sp = build(tmp_path / "sp")
    part = sp / "state-00000" / "part-00000.parquet"
    os.truncate(part, part.stat().st_size - 1)
    refused_everywhere(sp, tmp_path, SavepointError, "part-00000.parquet: size .* recorded in _metadata.json")
