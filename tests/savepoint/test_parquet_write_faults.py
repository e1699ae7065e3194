"""Writes that fail (issue 16): full disks, file-size limits, read-only and forbidden destinations,
signals, concurrent writers and leftovers of killed runs. Each failure is one typed line naming
the path, and nothing half-written is left. Real file systems (tmpfs, read-only bind mounts,
dropped capabilities), real Parquet; the cases that need root say so and are skipped without it."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from fs_faults import (  # noqa: F401 (fixtures)
    leftovers,
    one_error_line,
    read_only_dir,
    signal_when_ready,
    tiny_fs,
)
from processes import child_env
from savepoint.event_entries import EVOLVED, NEW, OLD, L, entries

from statemorph.engine import migrate_savepoint
from statemorph.errors import DestinationBusyError, ExitCode, OutputError, UsageError
from statemorph.savepoint import SavepointWriter, read_state_table, remove_stale_temp_dirs, verify_savepoint
from statemorph.savepoint import files as files_mod
from statemorph.state import ValueStateDescriptor


def source(path: Path, n: int = 40, payload: int = 20) -> Path:
    with SavepointWriter(path, max_parallelism=128, key_serializer=L) as w:
        w.write_state("events", "value", entries(n, payload), value_serializer=OLD)
    return path


def schema_file(tmp_path: Path) -> str:
    p = tmp_path / "new.toml"
    p.write_text(f"[states.events]\ntype = '''{EVOLVED}'''\n", encoding="utf-8")
    return str(p)


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "statemorph", *args], capture_output=True, text=True,
                          env=child_env(), timeout=300)


# -- temporary directories ---------------------------------------------------------------------------

def test_temp_dir_is_recognisable_and_removed_on_failure(tmp_path):
    with pytest.raises(RuntimeError, match="boom"):
        with SavepointWriter(tmp_path / "sp", max_parallelism=128, key_serializer=L) as w:
            w.add_state("events", "value", value_serializer=OLD).write(entries(5, 10))
            assert re.fullmatch(rf"\.sp\.statemorph-tmp-{os.getpid()}-[0-9a-f]+", w.temp_dir.name)
            assert leftovers(tmp_path) == [".sp.statemorph-claim", w.temp_dir.name]
            raise RuntimeError("boom")
    assert list(tmp_path.iterdir()) == []


def test_a_later_run_removes_what_dead_runs_left_and_keeps_live_ones(tmp_path):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    alive = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    try:
        stale = tmp_path / f".sp.statemorph-tmp-{dead.pid}-abc123"
        live = tmp_path / f".sp.statemorph-tmp-{alive.pid}-def456"
        other = tmp_path / f".other.statemorph-tmp-{dead.pid}-0a0a0a"
        for d in (stale, live, other):
            (d / "state-00000").mkdir(parents=True)
            (d / "state-00000" / "part-00000.parquet").write_bytes(b"partial")
        (tmp_path / ".sp.statemorph-claim").write_text(f"pid {dead.pid} on somewhere\n")  # nobody holds it
        with SavepointWriter(tmp_path / "sp", max_parallelism=128, key_serializer=L) as w:
            w.write_state("events", "value", entries(3, 10), value_serializer=OLD)
        assert not stale.exists() and live.exists() and other.exists()
        assert verify_savepoint(tmp_path / "sp").state("events").rows == 3
        assert files_mod.stale_temp_dirs(tmp_path) == ([other], [live])
        assert remove_stale_temp_dirs(tmp_path) == [other]
        assert leftovers(tmp_path) == [live.name]
    finally:
        alive.communicate(b"")


# -- one destination, one writer ---------------------------------------------------------------------

def test_a_second_writer_for_the_same_destination_is_refused(tmp_path):
    dst = tmp_path / "sp"
    with SavepointWriter(dst, max_parallelism=128, key_serializer=L) as w:
        w.write_state("events", "value", entries(4, 10), value_serializer=OLD)
        with pytest.raises(DestinationBusyError, match=rf"{dst} is being written by another statemorph run "
                                                       rf"\(pid {os.getpid()} on "):
            SavepointWriter(dst, max_parallelism=128, key_serializer=L)
    assert verify_savepoint(dst).state("events").rows == 4
    assert leftovers(tmp_path) == []


HOLDER = textwrap.dedent("""
    import sys
    import pyarrow as pa
    from statemorph.savepoint import SavepointWriter
    from statemorph.serializers import LongSerializer
    L = LongSerializer()
    with SavepointWriter(sys.argv[1], max_parallelism=128, key_serializer=L) as w:
        w.add_state("events", "value", value_serializer=L).write(pa.table({
            "key_group": pa.array([0], pa.int32()), "key": [L.to_bytes(1)], "namespace": [b"\\x00"],
            "value": [L.to_bytes(2)]}))
        print("holding", flush=True)
        sys.stdin.read()
    print("committed", flush=True)
""")


def test_concurrent_migrations_to_one_destination_give_one_result_and_one_clear_error(tmp_path):
    src = source(tmp_path / "src")
    dst = tmp_path / "dst"
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(dst)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True, env=child_env())
    try:
        assert holder.stdout.readline().strip() == "holding"
        p = run_cli("migrate", str(src), "--schema", schema_file(tmp_path), "--out", str(dst))
        one_error_line(p, ExitCode.USAGE, rf"{dst} is being written by another statemorph run \(pid {holder.pid} ")
        out, _ = holder.communicate("", timeout=120)
    finally:
        if holder.poll() is None:
            holder.kill()
    assert holder.returncode == 0 and out.strip() == "committed"
    assert verify_savepoint(dst).state("events").rows == 1  # the holder's result, whole
    assert leftovers(tmp_path) == []


# -- the output inside the source --------------------------------------------------------------------

@pytest.mark.parametrize("inside", ["new", "state-00000/new"])
def test_output_inside_the_source_is_refused(tmp_path, inside):
    src = source(tmp_path / "src")
    before = sorted(p.relative_to(src).as_posix() for p in src.rglob("*"))
    with pytest.raises(UsageError, match="is inside the source savepoint"):
        migrate_savepoint(src, src / inside, [ValueStateDescriptor("events", NEW)])
    p = run_cli("migrate", str(src), "--schema", schema_file(tmp_path), "--out", str(src / inside))
    one_error_line(p, ExitCode.USAGE, "is inside the source savepoint")
    (tmp_path / "link").symlink_to(src)
    with pytest.raises(UsageError, match="is inside the source savepoint"):
        migrate_savepoint(src, tmp_path / "link" / "x", [])
    assert sorted(p.relative_to(src).as_posix() for p in src.rglob("*")) == before


# -- full, limited, read-only and forbidden destinations ---------------------------------------------

def test_disk_full_is_one_line_and_leaves_nothing(tmp_path, tiny_fs):  # noqa: F811 (fixture)
    with pytest.raises(OutputError, match=rf"cannot write {tiny_fs}/\.sp\.statemorph-tmp-.*: no space left on "
                                          rf"device$"):
        with SavepointWriter(tiny_fs / "sp", max_parallelism=128, key_serializer=L) as w:
            w.write_state("events", "value", entries(1500, 2000), value_serializer=OLD)
    assert list(tiny_fs.iterdir()) == []
    src = source(tmp_path / "src", n=1500, payload=2000)
    p = run_cli("migrate", str(src), "--schema", schema_file(tmp_path), "--out", str(tiny_fs / "dst"))
    one_error_line(p, ExitCode.OUTPUT_ERROR, rf"cannot write {tiny_fs}/.*: no space left on device")
    assert list(tiny_fs.iterdir()) == []
    assert read_state_table(src, "events").num_rows == 1500


FSIZE_WRITER = textwrap.dedent("""
    import resource, sys
    from savepoint.event_entries import L, OLD, entries
    from statemorph.errors import OutputError
    from statemorph.savepoint import SavepointWriter
    resource.setrlimit(resource.RLIMIT_FSIZE, (200_000, 200_000))
    try:
        with SavepointWriter(sys.argv[1], max_parallelism=128, key_serializer=L) as w:
            w.write_state("events", "value", entries(500, 2000), value_serializer=OLD)
    except OutputError as e:
        print(e)
""")


def test_file_size_limit_is_one_line_and_leaves_nothing(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    p = subprocess.run([sys.executable, "-c", FSIZE_WRITER, str(out / "sp")],
                       capture_output=True, text=True, env=child_env(), timeout=300)
    assert p.returncode == 0, p.stderr
    assert re.fullmatch(rf"cannot write {out}/\.sp\.statemorph-tmp-\S+: file too large \(file-size limit\)\n",
                        p.stdout), p.stdout
    assert list(out.iterdir()) == []


def test_read_only_destination_is_one_line_and_leaves_nothing(tmp_path, read_only_dir):  # noqa: F811 (fixture)
    with pytest.raises(OutputError, match=rf"^cannot create the savepoint {read_only_dir}/sp: read-only file system$"):
        SavepointWriter(read_only_dir / "sp", max_parallelism=128, key_serializer=L)
    src = source(tmp_path / "src")
    p = run_cli("migrate", str(src), "--schema", schema_file(tmp_path), "--out", str(read_only_dir / "dst"))
    one_error_line(p, ExitCode.OUTPUT_ERROR, rf"cannot create the savepoint {read_only_dir}/dst: read-only file system")
    assert list(read_only_dir.iterdir()) == []


def test_permission_denied_is_one_line_and_leaves_nothing(tmp_path):
    """Root ignores file modes, so the child drops the capabilities that let it (setpriv)."""
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root and setpriv to drop CAP_DAC_OVERRIDE")
    src = source(tmp_path / "src")
    forbidden = tmp_path / "forbidden"
    forbidden.mkdir(mode=0o755)
    os.chown(forbidden, 65534, 65534)
    caps = "-dac_override,-dac_read_search,-fowner"
    p = subprocess.run(["setpriv", f"--inh-caps={caps}", f"--bounding-set={caps}", sys.executable, "-m",
                        "statemorph", "migrate", str(src), "--schema", schema_file(tmp_path), "--out",
                        str(forbidden / "dst")], capture_output=True, text=True,
                       env=child_env(), timeout=300)
    one_error_line(p, ExitCode.OUTPUT_ERROR, rf"cannot create the savepoint {forbidden}/dst: permission denied")
    assert list(forbidden.iterdir()) == []


# -- signals -----------------------------------------------------------------------------------------

def test_signal_handlers_are_installed_only_while_writing(tmp_path):
    before = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    with SavepointWriter(tmp_path / "sp", max_parallelism=128, key_serializer=L) as w:
        assert all(signal.getsignal(sig) is files_mod._on_signal for sig in before)
        w.write_state("events", "value", entries(2, 10), value_serializer=OLD)
    assert {sig: signal.getsignal(sig) for sig in before} == before


SLOW_WRITER = textwrap.dedent("""
    import sys, time
    from savepoint.event_entries import L, OLD, entries
    from statemorph.savepoint import SavepointWriter
    with SavepointWriter(sys.argv[1], max_parallelism=128, key_serializer=L) as w:
        s = w.add_state("events", "value", value_serializer=OLD)
        for i in range(100000):
            s.write(entries(10, 10))
            if i == 3:
                print("writing", flush=True)
            time.sleep(0.01)
""")


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_sigint_and_sigterm_remove_the_temporary_directory(tmp_path, sig):
    """After the cleanup the signal goes to the previous handler: SIGTERM's default kills the
    process, SIGINT's raises KeyboardInterrupt (uncaught, Python then exits by SIGINT too)."""
    out = tmp_path / "out"
    out.mkdir()
    status, err = signal_when_ready([sys.executable, "-c", SLOW_WRITER, str(out / "sp")],
                                    "writing", sig, child_env(), lambda: bool(leftovers(out)))
    assert status == -sig, err
    assert list(out.iterdir()) == []
