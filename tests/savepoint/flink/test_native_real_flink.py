"""Native savepoints and retained incremental checkpoints of real Flink 2.3 RocksDB jobs (issue 21):
their ``_metadata`` parses and writes back byte for byte, ``inspect`` shows the format and each
subtask's RocksDB files, the state tables equal those of the canonical conversion, and the
canonical savepoint and the Parquet form converted from them restore in real Flink, into either
backend, with every value the job wrote. Damaged and hostile inputs are one typed line and
nothing is written."""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from savepoint.flink.format_helpers import hashable

from statemorph.cli.main import main
from statemorph.engine.flink_ranges import read_flink_state
from statemorph.engine.formats import FLINK, NATIVE, format_of
from statemorph.errors import (
    FlinkSavepointError,
    NotCanonicalSavepointError,
    SavepointPathError,
    UnsupportedStateError,
)
from statemorph.savepoint.flink import FlinkSavepoint, parse_metadata, serialize_metadata
from statemorph.savepoint.flink.handles import ByteStreamHandle, FileHandle, RelativeFileHandle
from statemorph.savepoint.flink.native import NativeSavepoint, checkpoint_namer, is_native
from statemorph.savepoint.flink.native_handles import RocksFile

pytestmark = pytest.mark.java

SPECS = {
    "native-p2": {"backend": "rocksdb", "format": "native", "parallelism": 2},
    "checkpoint-p2": {"backend": "rocksdb", "format": "checkpoint", "parallelism": 2},
}
#: Taken too, and refused: the hashmap backend's checkpoints hold key groups in its own format.
HASHMAP = {"hashmap-checkpoint-p1": {"backend": "hashmap", "format": "checkpoint", "parallelism": 1}}
#: Taken too: RocksDB's full checkpoints are native ones too (incremental handles), every file private in chk-N/.
FULL = {"full-checkpoint-p2": {"backend": "rocksdb", "format": "checkpoint", "incremental": False, "parallelism": 2}}


@pytest.fixture(scope="module")
def cases(real_flink: ModuleType, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """One native savepoint and one retained incremental checkpoint (three retained, sharing
    files) of the matrix job with every state kind, taken in one JVM."""
    root = tmp_path_factory.mktemp("native")
    pairs = []
    for name, spec in {**SPECS, **HASHMAP, **FULL}.items():
        f = root / f"{name}.json"
        f.write_text(json.dumps({"name": name, "storage": "filesystem", "inline_threshold": 100, "keys": 20,
                                 "records_per_key": 3, **spec}))
        pairs.append((f, root / name))
    real_flink.generate(pairs)
    return {name: root / name for name in {**SPECS, **HASHMAP, **FULL}}


def _source(case: Path) -> Path:
    """The directory to read: the savepoint, or the newest retained checkpoint (one Flink was still
    taking when the job was cancelled has no _metadata)."""
    sp = case / "savepoint"
    chks = sorted((c for c in sp.glob("chk-*") if (c / "_metadata").exists()), key=lambda p: int(p.name[4:]))
    return chks[-1] if chks else sp


def _expected(case: Path) -> dict[tuple[Any, str], Any]:
    doc = json.loads((case / "expected.json").read_text())
    return {(hashable(e["key"]), e["state"]): e["value"] for e in doc["entries"]}


def _got(entries: list[dict[str, Any]]) -> dict[tuple[Any, str], Any]:
    return {(hashable(e["key"]), e["state"]): e["value"] for e in entries}


def _copy(case: Path, tmp: Path) -> Path:
    """A writable copy of a case's savepoint or checkpoint directory; the path to read in it."""
    shutil.copytree(case / "savepoint", tmp / "copy")
    return tmp / "copy" / _source(case).relative_to(case / "savepoint")


def _namer(src: Path) -> Any:
    return checkpoint_namer(src.name) if src.name.startswith("chk-") else None


def _parse(src: Path) -> Any:
    namer = _namer(src)
    kw = {"namer": namer} if namer else {}
    return parse_metadata((src / "_metadata").read_bytes(), str(src), native=True, **kw)


def _write(src: Path, meta: Any) -> None:
    (src / "_metadata").write_bytes(serialize_metadata(meta))


def _instances(meta: Any) -> list[Any]:
    return [st.managed_native for op in meta.operators for st in op.subtasks or [] if st.managed_native]


@pytest.mark.parametrize("name", SPECS)
def test_metadata_parses_and_writes_back_byte_for_byte(cases: dict[str, Path], name: str) -> None:
    src = _source(cases[name])
    data = (src / "_metadata").read_bytes()
    meta = _parse(src)
    assert serialize_metadata(meta) == data
    handles = _instances(meta)
    assert len(handles) == 2 and all(h.code == 11 for h in handles)
    assert sorted(kg for h in handles for kg in h.key_groups) == list(range(128))
    for h in handles:
        names = {f.local_name for f in h.files()}
        assert "CURRENT" in names and any(n.startswith("MANIFEST-") for n in names)
        assert any(n.endswith(".sst") for n in names)
    with pytest.raises(NotCanonicalSavepointError, match="incremental RocksDB handle"):
        FlinkSavepoint(src)
    assert is_native(src)


def test_retained_checkpoints_share_files_and_name_them_absolutely(cases: dict[str, Path]) -> None:
    """Three checkpoints retained after the last record: the newest's SSTs are shared files the
    older ones reference too, named by absolute paths into shared/ of the job directory."""
    job = cases["checkpoint-p2"] / "savepoint"
    chks = sorted((c for c in job.glob("chk-*") if (c / "_metadata").exists()), key=lambda p: int(p.name[4:]))
    assert len(chks) >= 2
    files = [{f.handle.path.rsplit("/", 2)[-2] + "/" + f.handle.path.rsplit("/", 1)[-1]
              for h in _instances(_parse(c)) for f in h.shared if isinstance(f.handle, FileHandle)} for c in chks]
    assert all(n.startswith("shared/") for n in files[-1])
    assert files[-1] & files[-2], "the newest checkpoint reuses none of the previous one's shared files"


@pytest.mark.parametrize(("name", "label"), [("native-p2", "native savepoint"),
                                             ("checkpoint-p2", "incremental checkpoint chk-")])
def test_inspect_shows_format_files_and_every_state(cases: dict[str, Path], name: str, label: str,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    src = _source(cases[name])
    assert main(["inspect", str(src), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["savepoint_format"].startswith(label)
    op = next(o for o in doc["operators"] if o["uid"] == "state-op")
    assert [s["index"] for s in op["subtasks"]] == [0, 1]
    for sub in op["subtasks"]:
        assert sub["size"] == sum(f["size"] for f in sub["files"]) > 0
        assert {f["local_name"] for f in sub["files"]} >= {"CURRENT"}
        assert sub["readers"] and set(sub["readers"].values()) == {"sst"}, sub["readers"]
    expected = _expected(cases[name])
    counts = {s["name"]: s["entries"] for s in op["states"]}
    for state in ("events", "count", "last", "recent"):
        assert counts[state] == sum(1 for (_, st) in expected if st == state)
    assert main(["inspect", str(src), "-v"]) == 0
    text = capsys.readouterr().out
    assert f"Flink {label}" in text and "subtask 1: key groups 64..127, RocksDB instance of" in text
    assert "state 'events' is read from its SST files" in text


@pytest.mark.parametrize("name", SPECS)
def test_state_tables_equal_those_of_the_canonical_conversion(cases: dict[str, Path], name: str,
                                                              tmp_path: Path) -> None:
    src = _source(cases[name])
    NativeSavepoint(src).to_canonical(tmp_path / "canonical")
    assert format_of(src) is NATIVE and format_of(tmp_path / "canonical") is FLINK
    for state in ("events", "recent", "totals", "ttl_recent", "_timer_state/event_user-timers"):
        native = [b.to_pylist() for b in read_flink_state(src, "state-op", state, reader=NATIVE.reader)]
        canonical = [b.to_pylist() for b in read_flink_state(tmp_path / "canonical", "state-op", state)]
        assert sum(native, []) == sum(canonical, []) and sum(native, []), state


@pytest.mark.parametrize("name", SPECS)
@pytest.mark.parametrize("only", [None, range(20, 90)])
@pytest.mark.parametrize("slice_bytes", [1 << 20, 64])
def test_state_runs_are_the_key_group_runs_of_that_state(cases: dict[str, Path], name: str, only: range | None,
                                                         slice_bytes: int) -> None:
    """The table reader's one pass over a column family gives the runs the key-group walk gives
    for that state: one key group a run, a large one cut in slices, ``only``'s groups alone."""
    sp = NativeSavepoint(_source(cases[name]))
    seen = 0
    for op, st, handle in sp.instances():
        with sp.open_instance(op, st, handle) as instance:
            for sid in instance.families:
                want = [run for _, runs in instance.key_groups(only, slice_bytes, {sid}) for run in runs]
                got = list(instance.state_runs(sid, only, slice_bytes))
                assert [(r.state_id, r.keys, r.values) for r in got] == [(r.state_id, r.keys, r.values) for r in want]
                seen += sum(len(r.keys) for r in got)
    assert seen


def test_tables_are_read_without_laying_out_canonical_blocks(cases: dict[str, Path],
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """Reading a state's table takes the entries as RocksDB gives them: laying each key group out
    as a canonical block and scanning it back made the native read 3x slower than the canonical
    one (benchmarks/test_native_read.py)."""
    import statemorph.savepoint.flink.native_view as view

    src = _source(cases["native-p2"])
    want = [b.to_pylist() for b in read_flink_state(src, "state-op", "events", reader=NATIVE.reader)]

    def refused(*_: object) -> bytes:
        raise AssertionError("a canonical block was laid out")

    monkeypatch.setattr(view, "encode_key_group", refused)
    assert [b.to_pylist() for b in read_flink_state(src, "state-op", "events", reader=NATIVE.reader)] == want
    assert sum(want, [])


@pytest.mark.parametrize("name", SPECS)
def test_conversion_reads_each_column_family_in_one_pass(cases: dict[str, Path], name: str, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """``convert --to canonical`` (and so a native migration) walks each state's column family
    once, side by side, and encodes slices whole: seeking each key group's entries one by one
    made the conversion 2.5x slower (benchmarks/test_native_read.py). It reads the SST files
    themselves; the same bytes as through RocksDB's iterator."""
    from statemorph.savepoint.flink.native import RocksInstance

    src = _source(cases[name])
    with monkeypatch.context() as m:  # through RocksDB's iterator
        m.setattr(RocksInstance, "state_runs", RocksInstance.rocks_state_runs)
        NativeSavepoint(src).to_canonical(tmp_path / "before")

    def refused(*_: object) -> None:
        raise AssertionError("a column family was read through RocksDB, not from its SST files")

    monkeypatch.setattr(RocksInstance, "rocks_state_runs", refused)
    NativeSavepoint(src).to_canonical(tmp_path / "after")
    files = sorted(p.name for p in (tmp_path / "before").iterdir())
    assert files == sorted(p.name for p in (tmp_path / "after").iterdir()) and files
    assert all((tmp_path / "before" / f).read_bytes() == (tmp_path / "after" / f).read_bytes() for f in files)


@pytest.mark.parametrize("name", SPECS)
def test_converted_savepoints_restore_in_real_flink(real_flink: ModuleType, cases: dict[str, Path], name: str,
                                                    tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """native / checkpoint -> canonical (restored into RocksDB and the hashmap backend) and ->
    Parquet -> canonical: real Flink reads back every value the job wrote."""
    case = cases[name]
    src = _source(case)
    assert main(["convert", str(src), "--to", "canonical", "--out", str(tmp_path / "canonical"), "-q"]) == 0
    assert main(["convert", str(src), "--out", str(tmp_path / "parquet"), "-q"]) == 0
    assert main(["convert", str(tmp_path / "parquet"), "--out", str(tmp_path / "back"), "-q"]) == 0
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []
    spec = case / "spec.json"
    items = [(tmp_path / "canonical", spec), (tmp_path / "back", spec)]
    for overrides in ({}, {"backend": "hashmap"}):
        for (sp, _), result in zip(items, real_flink.restore(items, overrides=overrides), strict=True):
            assert result.ok, (sp, overrides, result.message, result.chain)
            assert _got(result.entries) == _expected(case), (sp, overrides)


# -- damaged and hostile inputs ---------------------------------------------------------------------

def _refused(src: Path, tmp: Path, capsys: pytest.CaptureFixture[str], match: str, native: bool = True) -> None:
    """``inspect``, ``convert --to canonical`` and (``native``) ``convert --to native`` each refuse
    ``src`` with one line (exit 4) and write nothing."""
    to_native = [["convert", str(src), "--to", "native", "--out", str(tmp / "out")]] if native else []
    for argv in (["inspect", str(src)], ["convert", str(src), "--to", "canonical", "--out", str(tmp / "out")],
                 *to_native):
        assert main(argv) == 4, argv
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and match in err, err
    assert not (tmp / "out").exists()
    assert [p.name for p in tmp.iterdir() if p.name.startswith(".out")] == []


def _sst(meta: Any) -> RocksFile:
    return next(f for f in _instances(meta)[0].files() if f.local_name.endswith(".sst"))


def test_a_missing_shared_file_is_refused(cases: dict[str, Path], tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    src = _copy(cases["checkpoint-p2"], tmp_path)
    handle = _sst(_parse(src)).handle
    assert isinstance(handle, FileHandle)
    (src.parent / checkpoint_namer(src.name)(handle, "")).unlink()
    _refused(src, tmp_path, capsys, "shared/")


def test_a_truncated_sst_is_refused(cases: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = _copy(cases["native-p2"], tmp_path)
    handle = _sst(_parse(src)).handle
    assert isinstance(handle, RelativeFileHandle)
    f = src / handle.relative_path
    f.write_bytes(f.read_bytes()[: handle.size // 2])
    _refused(src, tmp_path, capsys, handle.relative_path)


def test_a_sst_whose_size_metadata_matches_but_bytes_are_damaged_is_refused(
        cases: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The recorded size holds, the bytes do not: RocksDB's checksums find it, one line."""
    src = _copy(cases["native-p2"], tmp_path)
    handle = _sst(_parse(src)).handle
    assert isinstance(handle, RelativeFileHandle)
    f = src / handle.relative_path
    data = bytearray(f.read_bytes())
    data[: len(data) // 2] = bytes(len(data) // 2)
    f.write_bytes(bytes(data))
    _refused(src, tmp_path, capsys, "RocksDB", native=False)  # carried as it is into a native savepoint


def test_a_manifest_naming_other_files_is_refused(cases: dict[str, Path], tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """Subtask 0's MANIFEST given subtask 1's: it lists files of other sizes than those present."""
    src = _copy(cases["native-p2"], tmp_path)
    meta = _parse(src)
    a, b = _instances(meta)
    ma = next(f for f in a.files() if f.local_name.startswith("MANIFEST"))
    mb = next(f for f in b.files() if f.local_name.startswith("MANIFEST"))
    assert isinstance(ma.handle, RelativeFileHandle) and isinstance(mb.handle, RelativeFileHandle)
    shutil.copyfile(src / mb.handle.relative_path, src / ma.handle.relative_path)
    ma.handle.size = mb.handle.size
    _write(src, meta)
    _refused(src, tmp_path, capsys, "RocksDB")


@pytest.mark.parametrize("path", ["file:/etc/passwd", "file:/tmp/job/chk-1/x", "file:/tmp/job/shared/..",
                                  "file:/x/shared/a/../../../../etc/passwd", "passwd"])
def test_checkpoint_paths_stay_inside_the_job_directory(cases: dict[str, Path], tmp_path: Path, path: str,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    """An absolute path is taken by its last two parts, which must be shared/, taskowned/ or this
    checkpoint's own directory and a plain name: nothing outside the job directory is opened."""
    src = _copy(cases["checkpoint-p2"], tmp_path)
    meta = _parse(src)
    sst = _sst(meta)
    assert isinstance(sst.handle, FileHandle)
    sst.handle = FileHandle(path, sst.handle.size)
    _write(src, meta)
    with pytest.raises(SavepointPathError):
        NativeSavepoint(src)
    _refused(src, tmp_path, capsys, "refused")


def test_a_file_two_subtasks_name_is_refused(cases: dict[str, Path], tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    """A shared file is referenced by several checkpoints, but within one checkpoint by one handle."""
    src = _copy(cases["checkpoint-p2"], tmp_path)
    meta = _parse(src)
    a, b = _instances(meta)
    b.shared[0].handle = copy.deepcopy(a.shared[0].handle)
    _write(src, meta)
    _refused(src, tmp_path, capsys, "listed twice")


@pytest.mark.parametrize("local", ["../CURRENT", "a/CURRENT", "", "rocksdict-config.json"])
def test_instance_file_names_are_plain(cases: dict[str, Path], tmp_path: Path, local: str,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    src = _copy(cases["native-p2"], tmp_path)
    meta = _parse(src)
    current = next(f for f in _instances(meta)[0].private + _instances(meta)[0].shared if f.local_name == "CURRENT")
    current.local_name = local
    _write(src, meta)
    _refused(src, tmp_path, capsys, "refused")


def test_truncated_meta_data_is_refused(cases: dict[str, Path], tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    src = _copy(cases["native-p2"], tmp_path)
    meta = _parse(src)
    h = _instances(meta)[0]
    assert isinstance(h.meta, RelativeFileHandle)
    f = src / h.meta.relative_path
    data = f.read_bytes()[: h.meta.size // 2]
    f.write_bytes(data)
    h.meta.size = len(data)
    _write(src, meta)
    _refused(src, tmp_path, capsys, "meta data")


def test_truncated_metadata_is_refused(cases: dict[str, Path], tmp_path: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    src = _copy(cases["checkpoint-p2"], tmp_path)
    data = (src / "_metadata").read_bytes()
    for cut in (len(data) // 3, len(data) // 2):  # the tail is CheckpointProperties, kept opaque
        (src / "_metadata").write_bytes(data[:cut])
        with pytest.raises(FlinkSavepointError):
            NativeSavepoint(src)


def test_inline_instance_files_need_no_file(cases: dict[str, Path], tmp_path: Path) -> None:
    """Small RocksDB files (CURRENT) are inline in _metadata; an SST moved inline reads the same."""
    src = _copy(cases["native-p2"], tmp_path)
    before = [b.to_pylist() for b in read_flink_state(src, "state-op", "count", reader=NATIVE.reader)]
    meta = _parse(src)
    for h in _instances(meta):
        for f in h.shared:
            if isinstance(f.handle, RelativeFileHandle):
                f.handle = ByteStreamHandle(f.local_name, (src / f.handle.relative_path).read_bytes())
    _write(src, meta)
    assert [b.to_pylist() for b in read_flink_state(src, "state-op", "count", reader=NATIVE.reader)] == before


def test_hashmap_checkpoints_are_refused_naming_the_backend(cases: dict[str, Path], tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    """Before: the key groups were scanned as canonical ones and failed on a value length."""
    src = _source(cases["hashmap-checkpoint-p1"])
    assert is_native(src)
    for argv in (["inspect", str(src)], ["convert", str(src), "--to", "canonical", "--out", str(tmp_path / "out")]):
        assert main(argv) == 7, argv
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and "state.backend.type: hashmap" in err, err
    assert not (tmp_path / "out").exists()


def test_spark_reads_a_native_savepoint_by_key_group_ranges(cases: dict[str, Path], spark: Any) -> None:
    """Spark tasks each open the RocksDB instance of their key-group range (an instance records no
    per-key-group offsets: its range is cut by key-group count). Before: the splits saw no keyed
    stream and the DataFrame was empty."""
    from statemorph.engine.spark import read_state, savepoint_metadata
    from statemorph.savepoint.flink.splits import key_group_splits

    src = _source(cases["native-p2"])
    op = next(o for o in NativeSavepoint(src).metadata.operators if o.uid == "state-op")
    splits = key_group_splits(op, 5)
    assert sorted(kg for s in splits for kg in s.key_groups) == list(range(128)) and len(splits) >= 4
    for state in ("count", "recent"):
        rows = read_state(spark, src, state, operator="state-op", tasks=5).collect()
        local = sum((b.to_pylist() for b in read_flink_state(src, "state-op", state, reader=NATIVE.reader)), [])
        assert sorted(map(str, (r.asDict(recursive=True) for r in rows))) == sorted(map(str, local)) and local
    counts = {r.state: r.entries for r in savepoint_metadata(spark, src).collect() if r.operator_uid == "state-op"}
    assert counts["count"] == sum(1 for (_, st) in _expected(cases["native-p2"]) if st == "count") > 0


@pytest.mark.parametrize("name", SPECS)
def test_migrated_to_a_new_events_type_restores_in_real_flink(real_flink: ModuleType, cases: dict[str, Path],
                                                              name: str, tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    """``check`` plans on the native savepoint itself; ``migrate`` writes a canonical savepoint in
    the new type (by way of a staged canonical conversion, removed after), which real Flink
    restores with the evolved Events type. Before: both refused the incremental handles."""
    case = cases[name]
    src = _source(case)
    schema = _events_schema(tmp_path)
    assert main(["check", str(src), "--schema", str(schema), "-q"]) == 1  # compatible after migration
    dst = tmp_path / "v2"
    assert main(["migrate", str(src), "--schema", str(schema), "--out", str(dst), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["source"] == str(src) and doc["savepoint_format"] == "canonical"  # the default: either backend
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []
    _restores_evolved(real_flink, dst, case, schema)


def test_a_native_savepoint_of_the_sql_job_converts_to_what_flink_restores(real_flink: ModuleType,
                                                                           tmp_path: Path) -> None:
    """The Flink SQL job (RowData keys and values, aggregation and deduplication state) on RocksDB,
    parallelism 2: its native savepoint converted to canonical, converted to native, and rewritten
    natively with every keyed state through the SST writer (its own snapshot and values) restores
    into the SQL job with the same changelog as Flink's own canonical savepoint of the same run's
    state."""
    from statemorph.savepoint.flink.native_writer import write_native
    from statemorph.savepoint.flink.rewrite import check_migratable

    base = json.loads((Path(__file__).parents[2] / "data" / "flink_sql" / "sql-rocksdb-p2" / "spec.json").read_text())
    pairs = []
    for fmt in ("native", "canonical"):
        spec = tmp_path / f"{fmt}.json"
        spec.write_text(json.dumps({**base, "name": f"sql-{fmt}", "format": fmt}))
        pairs.append((spec, tmp_path / fmt))
    real_flink.sql_generate(pairs)
    assert json.loads((tmp_path / "native" / "expected.json").read_text())["outputs"] == \
        json.loads((tmp_path / "canonical" / "expected.json").read_text())["outputs"]
    native = tmp_path / "native" / "savepoint"
    assert NativeSavepoint(native).format == "native savepoint"
    assert main(["convert", str(native), "--to", "canonical", "--out", str(tmp_path / "converted"), "-q"]) == 0
    assert main(["convert", str(native), "--to", "native", "--out", str(tmp_path / "as-native"), "-q"]) == 0
    sp = NativeSavepoint(native)
    changes: dict[tuple[str, str], tuple[bytes, Any]] = {}
    for op, st, handle in sp.instances():
        for m in sp.header(op, st, handle).states:
            try:
                check_migratable(op, m)
            except (FlinkSavepointError, UnsupportedStateError):  # timers, or values it cannot take apart: carried
                continue
            value, _ = m.value_snapshot_unwrapped()
            assert value is not None
            changes[(op.uid_hash, m.name)] = (value.envelope_bytes(), lambda a: a)
    assert len({op for op, _ in changes}) >= 2, changes.keys()
    done = write_native(sp, tmp_path / "rewritten", changes)
    assert done.rebuilt_instances >= 4 and sum(done.migrated.values()) > 0
    spec = tmp_path / "canonical" / "spec.json"
    *results, control = real_flink.sql_restore([(tmp_path / "converted", spec), (tmp_path / "as-native", spec),
                                                (tmp_path / "rewritten", spec),
                                                (tmp_path / "canonical" / "savepoint", spec)])
    assert control.ok and len(control.entries) > 1, control.message
    for result in results:
        assert result.ok, (result.message, result.chain)
        assert sorted(map(json.dumps, result.entries)) == sorted(map(json.dumps, control.entries))


def test_two_names_of_one_file_are_refused(cases: dict[str, Path], tmp_path: Path) -> None:
    """Two SSTs of one instance that are one file (a hard link): refused before any is read."""
    src = _copy(cases["native-p2"], tmp_path)
    ssts = [f.handle for f in _instances(_parse(src))[0].files() if f.local_name.endswith(".sst")]
    a, b = ssts[0], ssts[1]
    assert isinstance(a, RelativeFileHandle) and isinstance(b, RelativeFileHandle)
    (src / b.relative_path).unlink()
    (src / b.relative_path).hardlink_to(src / a.relative_path)
    meta = _parse(src)
    next(f for f in _instances(meta)[0].files() if f.handle == b).handle = RelativeFileHandle(b.relative_path,
                                                                                              a.size)
    _write(src, meta)
    with pytest.raises(SavepointPathError, match="same file|one file|also"):
        NativeSavepoint(src)
    assert main(["inspect", str(src)]) != 0


def test_a_full_rocksdb_checkpoint_reads_and_converts(real_flink: ModuleType, cases: dict[str, Path], tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """RocksDB's full checkpoints (``incremental: false``): Flink 2.3 writes them natively too, each
    instance's files all private, in chk-N/ by absolute paths: read through the checkpoint's
    containment rule, labelled a (full) checkpoint, converted and restored."""
    case = cases["full-checkpoint-p2"]
    src = _source(case)
    handles = _instances(_parse(src))
    assert is_native(src) and handles and all(not h.shared and h.private for h in handles)
    assert main(["inspect", str(src), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["savepoint_format"] == f"checkpoint {src.name}"
    assert main(["convert", str(src), "--to", "canonical", "--out", str(tmp_path / "canonical"), "-q"]) == 0
    result = real_flink.restore([(tmp_path / "canonical", case / "spec.json")])[0]
    assert result.ok, (result.message, result.chain)
    assert _got(result.entries) == _expected(case)


# -- migrated (or rewritten) into a native savepoint ------------------------------------------------

def _events_schema(tmp: Path) -> Path:
    from savepoint.flink.flink_cases import EVOLVED_EVENTS

    schema = tmp / "v2.toml"
    schema.write_text("".join(f'[operators."state-op".states.{s}]\ntype = "{EVOLVED_EVENTS.replace(chr(34), "")}"\n'
                              for s in ("events", "ttl_events")), encoding="utf-8")
    return schema


def _restores_evolved(real_flink: ModuleType, dst: Path, case: Path, schema: Path) -> None:
    """``dst`` (migrated to the evolved Events type) checks as is and real Flink restores every
    value in the new type."""
    from savepoint.flink.flink_cases import EVOLVED_EVENTS, EVOLVED_EVENTS_FIELDS, reshape

    assert main(["check", str(dst), "--schema", str(schema), "-q"]) == 0
    result = real_flink.restore([(dst, case / "spec.json")], events_type=EVOLVED_EVENTS)[0]
    assert result.ok, (result.message, result.chain)
    want = {(k, s): reshape(v, EVOLVED_EVENTS_FIELDS) if s in ("events", "ttl_events") else v
            for (k, s), v in _expected(case).items()}
    assert _got(result.entries) == want


def _file_bytes(sp: NativeSavepoint, handle: Any) -> bytes:
    if isinstance(handle, ByteStreamHandle):
        return handle.data
    return Path(sp.files.resolve(sp.namer(handle, ""))).read_bytes()


def _cf_ssts(sp: NativeSavepoint) -> list[dict[str, set[str]]]:
    """Per instance: column family -> the names of its SST files (RocksDB's own ``rocksdb.sstables``)."""
    import re

    out = []
    for op, st, handle in sp.instances():
        with sp.open_instance(op, st, handle) as instance:
            out.append({instance.header.states[sid].name: {f"{int(n):06d}.sst" for n in re.findall(
                r"^\s*(\d+):", cf.property_value("rocksdb.sstables"), re.M)} for sid, cf in instance.families.items()})
    return out


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("name", SPECS)
def test_migrated_into_a_native_savepoint_restores_in_real_flink(real_flink: ModuleType, cases: dict[str, Path],
                                                                 name: str, tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """``migrate --to native``: the Events states get new SSTs in the new type, every other column
    family keeps its files; the result is a self-contained native savepoint (a checkpoint's shared
    files gathered, every path relative) that real Flink restores into RocksDB with the evolved
    type, every value checked. Before: a migration of a native savepoint wrote a canonical one only."""
    case = cases[name]
    src = _source(case)
    before = _tree(case / "savepoint")
    schema = _events_schema(tmp_path)
    dst = tmp_path / "v2"
    assert main(["migrate", str(src), "--schema", str(schema), "--out", str(dst), "--to", "native", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["savepoint_format"] == "native" and doc["rewritten_streams"] == 2
    assert {(s["name"], s["entries_migrated"]) for s in doc["states"]} == {
        (s, sum(1 for (_, st) in _expected(case) if st == s)) for s in ("events", "ttl_events")}
    assert {s["sst_writer"] for s in doc["states"]} == {"sst"}  # statemorph's SST writer wrote them
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []
    assert _tree(case / "savepoint") == before  # the input is only read
    out = NativeSavepoint(dst)
    assert format_of(dst) is NATIVE and out.format == "native savepoint"
    handles = _instances(out.metadata)
    assert len(handles) == 2 and all(h.code == 11 and not h.shared for h in handles)
    assert all(isinstance(f.handle, (RelativeFileHandle, ByteStreamHandle)) for h in handles for f in h.files())
    assert sorted(p.name for p in dst.iterdir() if p.is_dir()) == []
    _restores_evolved(real_flink, dst, case, schema)


def test_a_native_migration_opens_each_instance_once(cases: dict[str, Path], tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """``migrate --to native`` opens each RocksDB instance once, to write it: planning and
    describing the operators read the instances' headers only. Before, the plan's three
    descriptions opened every instance three more times (0.25 s of a 10 M-entry migration,
    benchmarks/test_native_read.py), each open linking its files and RocksDB reading its MANIFEST."""
    from statemorph.savepoint.flink.native import RocksInstance

    src = _source(cases["native-p2"])
    opened: list[str] = []
    real_init = RocksInstance.__init__

    def counted(self: RocksInstance, *args: Any, **kw: Any) -> None:
        real_init(self, *args, **kw)
        opened.append(self.where)

    monkeypatch.setattr(RocksInstance, "__init__", counted)
    assert main(["migrate", str(src), "--schema", str(_events_schema(tmp_path)), "--out", str(tmp_path / "v2"),
                 "--to", "native", "-q"]) == 0
    assert len(opened) == len(_instances(_parse(src))) == len(set(opened)) == 2, opened


def test_unchanged_column_families_keep_their_sst_files_byte_for_byte(cases: dict[str, Path],
                                                                      tmp_path: Path) -> None:
    """Each column family not migrated keeps exactly the SST files it had, byte for byte (list
    state's merge operands included); the migrated ones have only new files, written by
    statemorph's SST writer; the meta data names the new type; each rebuilt instance has a new
    backend id."""
    from statemorph.engine.formats import migrate_savepoint
    from statemorph.schema_file import load_schema

    src = _source(cases["native-p2"])
    schema = load_schema(_events_schema(tmp_path))
    _, descriptors = NATIVE.plan(str(src), schema)
    report = migrate_savepoint(src, tmp_path / "v2", descriptors, to="native")
    assert report.savepoint_format == "native" and report.carried_files > 0
    old, new = NativeSavepoint(src), NativeSavepoint(tmp_path / "v2")
    migrated = {"events", "ttl_events"}
    for (_, _, h_old), (_, _, h_new), cf_old, cf_new in zip(old.instances(), new.instances(), _cf_ssts(old),
                                                            _cf_ssts(new), strict=True):
        assert h_new.backend_id != h_old.backend_id and h_new.key_groups == h_old.key_groups
        files_old = {f.local_name: f.handle for f in h_old.files()}
        files_new = {f.local_name: f.handle for f in h_new.files()}
        assert set(cf_old) == set(cf_new)
        for state, ssts in cf_old.items():
            if state in migrated:
                assert not cf_new[state] & set(files_old) and cf_new[state], state
                continue
            assert cf_new[state] == ssts, state
            for sst in ssts:
                assert _file_bytes(new, files_new[sst]) == _file_bytes(old, files_old[sst]), (state, sst)
        assert sum(len(s) for s in cf_old.values()) > len(migrated)
    assert NATIVE.plan(str(tmp_path / "v2"), schema)[0].exit_status == 0  # the meta data names the new type
    for state in ("count", "recent", "totals", "ttl_recent"):
        a = [b.to_pylist() for b in read_flink_state(src, "state-op", state, reader=NATIVE.reader)]
        b = [b.to_pylist() for b in read_flink_state(tmp_path / "v2", "state-op", state, reader=NATIVE.reader)]
        assert sum(a, []) == sum(b, []) and sum(a, []), state


@pytest.mark.parametrize("name", SPECS)
def test_a_plain_rewrite_to_native_carries_every_file_and_restores(real_flink: ModuleType, cases: dict[str, Path],
                                                                   name: str, tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """``convert --to native`` and a migration that changes nothing: every instance carried, each
    file the same bytes (a checkpoint's shared files gathered into the new directory), restored
    by real Flink with every value."""
    case = cases[name]
    src = _source(case)
    assert main(["schema", str(src)]) == 0
    (tmp_path / "same.toml").write_text(capsys.readouterr().out, encoding="utf-8")
    assert main(["migrate", str(src), "--schema", str(tmp_path / "same.toml"), "--out", str(tmp_path / "noop"),
                 "--to", "native", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["entries_migrated"] == 0 and doc["rewritten_streams"] == 0
    assert main(["convert", str(src), "--to", "native", "--out", str(tmp_path / "native"), "-q"]) == 0
    old = NativeSavepoint(src)
    for out in (tmp_path / "noop", tmp_path / "native"):
        new = NativeSavepoint(out)
        assert new.format == "native savepoint"
        for (_, _, a), (_, _, b) in zip(old.instances(), new.instances(), strict=True):
            assert (b.backend_id, b.handle_id, b.key_groups, b.shared) == (a.backend_id, a.handle_id, a.key_groups, [])
            assert [(f.local_name, _file_bytes(new, f.handle)) for f in b.private] == \
                [(f.local_name, _file_bytes(old, f.handle)) for f in a.files()]
            assert _file_bytes(new, b.meta) == _file_bytes(old, a.meta)
    result = real_flink.restore([(tmp_path / "native", case / "spec.json")])[0]
    assert result.ok, (result.message, result.chain)
    assert _got(result.entries) == _expected(case)


def test_a_failed_native_migration_leaves_nothing(cases: dict[str, Path], tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str],
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """A damaged SST of a migrated column family (exit 4) and a full disk while the new instance is
    collected (exit 6): one line each, no output, no staging directory left."""
    import errno

    from statemorph.savepoint.flink import native_writer

    schema = _events_schema(tmp_path)
    src = _copy(cases["native-p2"], tmp_path)
    sst = next(f for f in _instances(_parse(src))[0].files() if f.local_name.endswith(".sst")).handle
    assert isinstance(sst, RelativeFileHandle)
    data = bytearray((src / sst.relative_path).read_bytes())
    data[: len(data) // 2] = bytes(len(data) // 2)
    (src / sst.relative_path).write_bytes(bytes(data))
    argv = ["migrate", str(src), "--schema", str(schema), "--out", str(tmp_path / "out"), "--to", "native"]
    assert main(argv) == 4
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "RocksDB" in err, err
    assert not (tmp_path / "out").exists() and [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []

    def full(*_: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(native_writer._Writer, "_collect", full)
    argv[1] = str(_source(cases["native-p2"]))
    assert main(argv) == 6
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "cannot write" in err, err
    assert not (tmp_path / "out").exists() and [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_to_native_is_a_usage_error_where_it_cannot_be_written(cases: dict[str, Path], tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    """A canonical savepoint migrates to canonical only; the Spark engine writes canonical ones:
    exit 2 before anything is planned or written."""
    src = _source(cases["native-p2"])
    schema = _events_schema(tmp_path)
    NativeSavepoint(src).to_canonical(tmp_path / "canonical")
    for argv, words in (
            (["migrate", str(tmp_path / "canonical"), "--to", "native"], "migrates to canonical only"),
            (["migrate", str(src), "--to", "native", "--engine", "spark"], "local engine")):
        assert main([*argv, "--schema", str(schema), "--out", str(tmp_path / "out")]) == 2, argv
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and words in err, err
    assert not (tmp_path / "out").exists()


def test_every_state_kind_rewritten_through_the_sst_writer_restores(real_flink: ModuleType, cases: dict[str, Path],
                                                                    tmp_path: Path) -> None:
    """Value, list and map state (with and without TTL) each rewritten with its own snapshot and
    values: list state appended with ``add`` is a stack of merge operands in the input's SSTs
    (Flink's ``StringAppendTESTOperator``), read merged and written as one value by statemorph's
    SST writer (``sst_writer``: Flink's table options, Snappy, XXH3, format_version 5); real Flink
    restores every value of every state from the new SSTs."""
    from statemorph.savepoint.flink.native_writer import write_native

    case = cases["native-p2"]
    sp = NativeSavepoint(_source(case))
    header = sp.header(*next(sp.instances()))
    states = ("events", "count", "last", "recent", "totals", "ttl_count", "ttl_recent", "ttl_totals")
    changes: dict[tuple[str, str], tuple[bytes, Any]] = {}
    for state in states:
        value, _ = header.state(state)[1].value_snapshot_unwrapped()
        assert value is not None
        changes[("state-op", state)] = (value.envelope_bytes(), lambda a: a)
    done = write_native(sp, tmp_path / "out", changes)
    assert done.rebuilt_instances == 2
    assert done.writers == {("state-op", s): "sst" for s in states}  # statemorph's SST writer, no fallback
    assert sorted(s for (_, s), n in done.migrated.items() if n > 0) == sorted(states)  # values: list elements ...
    new = NativeSavepoint(tmp_path / "out")
    for cf in _cf_ssts(new):
        old_names = {f.local_name for _, _, h in sp.instances() for f in h.files()}
        assert all(not cf[s] & old_names for s in states)
    result = real_flink.restore([(tmp_path / "out", case / "spec.json")])[0]
    assert result.ok, (result.message, result.chain)
    assert _got(result.entries) == _expected(case)


def test_a_table_format_the_sst_writer_does_not_write_is_written_by_rocksdb_and_said(
        cases: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """A column family whose table format the SST writer does not write (here: said so by a
    stand-in for ``sst_format``) is written by RocksDB's ``SstFileWriter``, and the report says so
    for that state (``--json``: ``sst_writer``; the summary line); the values are those the SST
    writer writes."""
    from statemorph.savepoint.flink import native_writer
    from statemorph.savepoint.flink.sst_writer import SstWriteUnsupported

    src = _source(cases["native-p2"])
    schema = _events_schema(tmp_path)
    assert main(["migrate", str(src), "--schema", str(schema), "--out", str(tmp_path / "sst"), "--to", "native",
                 "-q"]) == 0

    def refused(options_text: str, family: str, template: Path) -> Any:
        raise SstWriteUnsupported(f"column family {family!r}: table format_version 7 (written: 4 and 5)")

    monkeypatch.setattr(native_writer, "sst_format", refused)
    capsys.readouterr()
    assert main(["migrate", str(src), "--schema", str(schema), "--out", str(tmp_path / "rocksdb"), "--to", "native",
                 "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert {s["name"]: s["sst_writer"] for s in doc["states"]} == {
        s: f"rocksdb: column family {s!r}: table format_version 7 (written: 4 and 5)" for s in ("events", "ttl_events")}
    assert main(["migrate", str(src), "--schema", str(schema), "--out", str(tmp_path / "text"), "--to", "native"]) == 0
    assert "written by RocksDB's SstFileWriter" in capsys.readouterr().out
    for state in ("events", "ttl_events"):
        tables = [sorted(repr(r) for b in read_flink_state(tmp_path / d, "state-op", state, reader=NATIVE.reader)
                         for r in b.to_pylist()) for d in ("sst", "rocksdb")]
        assert tables[0] == tables[1] and tables[0]


def _merge_operands(tables: list[Any]) -> int:
    """How many Merge entries (list state appended with ``add``) the SST files hold, decoded by
    the Python tier of the SST kernels."""
    import numpy as np

    from statemorph.kernels import tier

    k, count = tier("python"), 0
    for t in tables:
        koff, voff = np.zeros(1 << 16, np.int64), np.zeros(1 << 16, np.int64)
        kd, vd = np.empty(1 << 22, np.uint8), np.empty(1 << 22, np.uint8)
        status, _, n = k.sst_decode(t.data, t.block_pos, t.block_len, 0, len(t.block_pos), t.checksum,
                                    np.empty(1 << 20, np.uint8), koff, kd, voff, vd, 0)
        assert status == 0, status
        count += sum(1 for i in range(n) if kd[koff[i + 1] - 8] == 2)
    return count


@pytest.mark.parametrize("name", [*SPECS, *FULL])
def test_the_sst_reader_reads_every_state_as_rocksdb_does(cases: dict[str, Path], name: str) -> None:
    """Every column family of real Flink 2.3 instances (format_version 5, XXH3 checksums, Snappy)
    is read from its SST files, not through RocksDB, and gives RocksDB's iterator's runs: list
    state's merge operands joined, a column family of several (overlapping) files merged by
    sequence number (the column families of these jobs hold one file each; several overlapping
    files are tests/kernels/test_sst_kernels.py's), ranges and slices as asked."""
    sp = NativeSavepoint(_source(cases[name]))
    merges = 0
    for op, st, handle in sp.instances():
        with sp.open_instance(op, st, handle) as instance:
            for sid in instance.families:
                for only, slice_bytes in ((None, 1 << 20), (range(20, 90), 64)):
                    want = list(instance.rocks_state_runs(sid, only, slice_bytes))
                    got = list(instance.state_runs(sid, only, slice_bytes))
                    assert [(r.state_id, r.keys, r.values) for r in got] == \
                        [(r.state_id, r.keys, r.values) for r in want]
            assert instance.readers and set(instance.readers.values()) == {"sst"}, instance.readers
            assert isinstance(instance._tables, dict)
            merges += sum(_merge_operands(ts) for ts in instance._tables.values())
    assert merges, "no merge operands: the list state's appends were not exercised"


def test_what_the_sst_reader_does_not_read_is_read_through_rocksdb(cases: dict[str, Path],
                                                                   monkeypatch: pytest.MonkeyPatch,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """A table feature the SST reader does not read (here: format_version 5 made unknown to it)
    sends the column family to RocksDB's iterator, visibly (``readers``, ``inspect -v``), with the
    same runs; one
    met after some runs were delivered resumes from the first key not yet delivered."""
    from statemorph.savepoint.flink import sst

    sp = NativeSavepoint(_source(cases["native-p2"]))
    op, st, handle = next(sp.instances())
    with sp.open_instance(op, st, handle) as instance:
        sid = instance.header.state("events")[0]
        want = [(r.keys, r.values) for r in instance.rocks_state_runs(sid, None, 200)]
        assert len(want) > 3
    monkeypatch.setattr(sst, "FORMAT_VERSIONS", range(2, 5))
    with sp.open_instance(op, st, handle) as instance:
        assert [(r.keys, r.values) for r in instance.state_runs(sid, None, 200)] == want
        assert instance.readers["events"].startswith("rocksdb: ") and "format_version 5" in instance.readers["events"]
    assert main(["inspect", str(_source(cases["native-p2"])), "-v"]) == 0
    assert "state 'events' is read through RocksDB (SST file " in capsys.readouterr().out
    monkeypatch.undo()
    real_runs = sst.FamilyReader.runs

    def two_then_unsupported(self: Any, *args: Any) -> Any:
        for i, run in enumerate(real_runs(self, *args)):
            if i == 2:
                raise sst.SstUnsupported("SST file x: a feature met late")
            yield run

    monkeypatch.setattr(sst.FamilyReader, "runs", two_then_unsupported)
    with sp.open_instance(op, st, handle) as instance:
        got = [(r.keys, r.values) for r in instance.state_runs(sid, None, 200)]
        flat = [e for k, v in want for e in zip(k, v, strict=True)]
        assert [e for k, v in got for e in zip(k, v, strict=True)] == flat
        assert instance.readers["events"] == "rocksdb: SST file x: a feature met late"
