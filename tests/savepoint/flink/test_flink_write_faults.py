"""Writes of Flink canonical savepoints that fail (issue 16, item 5): the rewriter writes the way the
Parquet form does (``statemorph.savepoint.files``): a claimed destination, a recognisable temporary
directory removed on failure, on SIGINT / SIGTERM and by a later run after kill -9, one typed line
naming the path for ENOSPC / EFBIG / EROFS / EACCES, ``--out`` inside the source refused. Inputs
are the committed real-Flink savepoints (and, where a run must last a while, one built from them
by ``benchmarks/flink_savepoint.py``); kill points are file-system events, not delays."""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from types import ModuleType

import pytest
from flink_cases import EVOLVED_EVENTS, ROOT, SAVEPOINTS
from fs_faults import (  # noqa: F401 (fixtures)
    digest_tree,
    kill_9_at,
    kill_points,
    leftovers,
    one_error_line,
    read_only_dir,
    signal_when_ready,
    tiny_fs,
)
from processes import child_env

from statemorph.errors import DestinationBusyError, ExitCode, FlinkSavepointError, OutputError, UsageError
from statemorph.savepoint.flink import FlinkSavepoint, rewrite

EVENTS = SAVEPOINTS / "events-rocksdb-p2-files-snappy" / "savepoint"
UID, STATE = "events-state", "events"
BUILT_N = 100_000

pytestmark = pytest.mark.skipif(not EVENTS.is_dir(), reason="no committed real-Flink savepoints")


def identity_changes(src: Path) -> dict[tuple[str, str], tuple[bytes, object]]:
    """The events state rewritten with its own snapshot and values: a rewrite that does all the
    writing and changes nothing."""
    sp = FlinkSavepoint(src)
    _, stream = next(iter(sp.keyed_streams(sp.operator(UID))))
    _, meta = stream.header.state(STATE)
    value, _ = meta.value_snapshot_unwrapped()
    assert value is not None
    return {(UID, STATE): (value.envelope_bytes(), lambda a: a)}


def read_all(path: Path) -> int:
    """Every entry of the events state (a complete, readable savepoint)."""
    return sum(b.num_rows for b in FlinkSavepoint(path).iter_state_batches(UID, STATE))


def schema_file(tmp_path: Path) -> Path:
    p = tmp_path / "new.toml"
    p.write_text(f'[operators.{UID}.states.{STATE}]\ntype = "{EVOLVED_EVENTS}"\n', encoding="utf-8")
    return p


def migrate_cmd(src: Path, schema: Path, dst: Path) -> list[str]:
    return [sys.executable, "-m", "statemorph", "migrate", str(src), "--schema", str(schema), "--out", str(dst)]


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "statemorph", *args], capture_output=True, text=True,
                          env=child_env(), timeout=300)


def _builder() -> ModuleType:
    spec = importlib.util.spec_from_file_location("statemorph_bench_flink_savepoint",
                                                  ROOT / "benchmarks" / "flink_savepoint.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A Flink savepoint of BUILT_N Events entries (the committed one's operators and headers,
    bigger key groups): its migration takes long enough to be interrupted part way."""
    return Path(_builder().build(tmp_path_factory.mktemp("flink-built"), BUILT_N, True).path)


# -- temporary directories ---------------------------------------------------------------------------

def test_temp_dir_is_recognisable_and_removed_on_failure(tmp_path: Path) -> None:
    seen: list[str] = []

    def boom(values: object) -> object:
        seen.extend(leftovers(tmp_path))
        raise RuntimeError("boom")

    (envelope, _), = identity_changes(EVENTS).values()
    with pytest.raises(FlinkSavepointError, match="the value migration failed: boom"):
        rewrite(EVENTS, tmp_path / "out", {(UID, STATE): (envelope, boom)})
    assert seen[0] == ".out.statemorph-claim"
    assert re.fullmatch(rf"\.out\.statemorph-tmp-{os.getpid()}-[0-9a-f]+", seen[1])
    assert list(tmp_path.iterdir()) == []


def test_a_later_run_removes_what_dead_runs_left_and_keeps_live_ones(tmp_path: Path) -> None:
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    alive = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    try:
        stale = tmp_path / f".out.statemorph-tmp-{dead.pid}-abc123"
        live = tmp_path / f".out.statemorph-tmp-{alive.pid}-def456"
        for d in (stale, live):
            d.mkdir()
            (d / "partial-keyed-state").write_bytes(b"partial")
        (tmp_path / ".out.statemorph-claim").write_text(f"pid {dead.pid} on somewhere\n")  # nobody holds it
        rewrite(EVENTS, tmp_path / "out", identity_changes(EVENTS))
        assert not stale.exists() and live.exists()
        assert leftovers(tmp_path) == [live.name]
        assert read_all(tmp_path / "out") == read_all(EVENTS)
    finally:
        alive.communicate(b"")


# -- one destination, one writer ---------------------------------------------------------------------

HOLDER = textwrap.dedent("""
    import sys
    sys.path.insert(0, sys.argv[3])
    from test_flink_write_faults import identity_changes
    from pathlib import Path
    from statemorph.savepoint.flink import rewrite
    (envelope, _), = identity_changes(Path(sys.argv[1])).values()
    held = []
    def hold(values):
        if not held:
            held.append(1)
            print("holding", flush=True)
            sys.stdin.read()
        return values
    rewrite(sys.argv[1], sys.argv[2], {("events-state", "events"): (envelope, hold)})
    print("committed", flush=True)
""")


def test_a_migration_to_a_destination_being_written_is_one_clear_error(tmp_path: Path) -> None:
    dst = tmp_path / "dst"
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(EVENTS), str(dst), str(Path(__file__).parent)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                              env=child_env(str(Path(__file__).parents[2]), str(Path(__file__).parent)))
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "holding"
        p = run_cli("migrate", str(EVENTS), "--schema", str(schema_file(tmp_path)), "--out", str(dst))
        one_error_line(p, ExitCode.USAGE, rf"{dst} is being written by another statemorph run \(pid {holder.pid} ")
        with pytest.raises(DestinationBusyError):
            rewrite(EVENTS, dst, identity_changes(EVENTS))
        out, _ = holder.communicate("", timeout=120)
    finally:
        if holder.poll() is None:
            holder.kill()
    assert holder.returncode == 0 and out.strip() == "committed"
    assert read_all(dst) == read_all(EVENTS)  # the holder's result, whole
    assert leftovers(tmp_path) == []


def test_two_concurrent_migrations_give_one_result_and_one_clear_error(tmp_path: Path) -> None:
    """Whichever starts writing first wins; the other is refused in one line, either while the
    winner holds the destination or because it already exists."""
    dst, schema = tmp_path / "dst", schema_file(tmp_path)
    runs = [subprocess.Popen(migrate_cmd(EVENTS, schema, dst), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                             text=True, env=child_env()) for _ in range(2)]
    results = []
    for p in runs:
        _, err = p.communicate(timeout=300)
        results.append(subprocess.CompletedProcess(p.args, p.returncode, "", err))
    ok = [r for r in results if r.returncode == 0]
    refused = [r for r in results if r.returncode != 0]
    assert len(ok) == 1 and len(refused) == 1, [r.stderr for r in results]
    # the CLI's own check says "already exists" as a usage error; a run that passed it just before
    # the winner committed hears it from the writer (a savepoint error): one line either way
    assert refused[0].returncode in (ExitCode.USAGE, ExitCode.DAMAGED_SAVEPOINT), refused[0].stderr
    one_error_line(refused[0], refused[0].returncode, r"is being written by another statemorph run|already exists")
    assert read_all(dst) == read_all(EVENTS)
    assert leftovers(tmp_path) == []


# -- the output inside the source --------------------------------------------------------------------

@pytest.mark.parametrize("inside", ["new", "sub/new"])
def test_output_inside_the_source_is_refused(tmp_path: Path, inside: str) -> None:
    src = tmp_path / "src"
    shutil.copytree(EVENTS, src)
    (src / "sub").mkdir()
    before = digest_tree(src)
    with pytest.raises(UsageError, match="is inside the source savepoint"):
        rewrite(src, src / inside, identity_changes(src))
    p = run_cli("migrate", str(src), "--schema", str(schema_file(tmp_path)), "--out", str(src / inside))
    one_error_line(p, ExitCode.USAGE, "is inside the source savepoint")
    (tmp_path / "link").symlink_to(src)
    with pytest.raises(UsageError, match="is inside the source savepoint"):
        rewrite(src, tmp_path / "link" / "x", identity_changes(src))
    p = run_cli("convert", str(src), "--out", str(tmp_path / "link" / "y"))
    one_error_line(p, ExitCode.USAGE, "is inside the source savepoint")
    assert digest_tree(src) == before
    assert {p.name for p in src.iterdir()} == {p.name for p in EVENTS.iterdir()} | {"sub"}


# -- full, limited, read-only and forbidden destinations ---------------------------------------------

def test_disk_full_is_one_line_and_leaves_nothing(built: Path, tmp_path: Path, tiny_fs: Path) -> None:  # noqa: F811 (fixture)
    assert sum(f.stat().st_size for f in built.iterdir()) > 2 << 20  # more than the 1 MiB file system
    with pytest.raises(OutputError, match=rf"^cannot write {tiny_fs}/\.out\.statemorph-tmp-\S+: no space left on "
                                          rf"device$"):
        rewrite(built, tiny_fs / "out", identity_changes(built))
    assert list(tiny_fs.iterdir()) == []
    p = run_cli("migrate", str(built), "--schema", str(schema_file(tmp_path)), "--out", str(tiny_fs / "dst"))
    one_error_line(p, ExitCode.OUTPUT_ERROR, rf"cannot write {tiny_fs}/\.dst\.statemorph-tmp-\S+: no space left on "
                                             rf"device$")
    assert list(tiny_fs.iterdir()) == []


FSIZE_REWRITE = textwrap.dedent("""
    import resource, sys
    sys.path.insert(0, sys.argv[3])
    from pathlib import Path
    from test_flink_write_faults import identity_changes
    from statemorph.errors import OutputError
    from statemorph.savepoint.flink import rewrite
    resource.setrlimit(resource.RLIMIT_FSIZE, (8_000, 8_000))
    try:
        rewrite(sys.argv[1], sys.argv[2], identity_changes(Path(sys.argv[1])))
    except OutputError as e:
        print(e)
""")


def test_file_size_limit_is_one_line_and_leaves_nothing(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    p = subprocess.run([sys.executable, "-c", FSIZE_REWRITE, str(EVENTS), str(out / "sp"), str(Path(__file__).parent)],
                       capture_output=True, text=True, timeout=300,
                       env=child_env(str(Path(__file__).parents[2]), str(Path(__file__).parent)))
    assert p.returncode == 0, p.stderr
    assert re.fullmatch(rf"cannot write {out}/\.sp\.statemorph-tmp-\S+: file too large \(file-size limit\)\n",
                        p.stdout), p.stdout
    assert list(out.iterdir()) == []


def test_read_only_destination_is_one_line_and_leaves_nothing(tmp_path: Path, read_only_dir: Path) -> None:  # noqa: F811 (fixture)
    with pytest.raises(OutputError, match=rf"^cannot create the savepoint {read_only_dir}/sp: read-only file system$"):
        rewrite(EVENTS, read_only_dir / "sp", identity_changes(EVENTS))
    p = run_cli("migrate", str(EVENTS), "--schema", str(schema_file(tmp_path)), "--out", str(read_only_dir / "dst"))
    one_error_line(p, ExitCode.OUTPUT_ERROR, rf"cannot create the savepoint {read_only_dir}/dst: read-only file system")
    p = run_cli("convert", str(EVENTS), "--out", str(read_only_dir / "pq"))
    one_error_line(p, ExitCode.OUTPUT_ERROR, rf"cannot create the savepoint {read_only_dir}/pq: read-only file system")
    assert list(read_only_dir.iterdir()) == []


def test_permission_denied_is_one_line_and_leaves_nothing(tmp_path: Path) -> None:
    """Root ignores file modes, so the child drops the capabilities that let it (setpriv)."""
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root and setpriv to drop CAP_DAC_OVERRIDE")
    forbidden = tmp_path / "forbidden"
    forbidden.mkdir(mode=0o755)
    os.chown(forbidden, 65534, 65534)
    caps = "-dac_override,-dac_read_search,-fowner"
    p = subprocess.run(["setpriv", f"--inh-caps={caps}", f"--bounding-set={caps}",
                        *migrate_cmd(EVENTS, schema_file(tmp_path), forbidden / "dst")],
                       capture_output=True, text=True, env=child_env(), timeout=300)
    one_error_line(p, ExitCode.OUTPUT_ERROR, rf"cannot create the savepoint {forbidden}/dst: permission denied")
    assert list(forbidden.iterdir()) == []


# -- signals -----------------------------------------------------------------------------------------

SLOW_REWRITE = textwrap.dedent("""
    import sys, time
    sys.path.insert(0, sys.argv[3])
    from pathlib import Path
    from test_flink_write_faults import identity_changes
    from statemorph.savepoint.flink import rewrite
    (envelope, _), = identity_changes(Path(sys.argv[1])).values()
    def slow(values):
        print("writing", flush=True)
        while True:
            time.sleep(0.05)
    rewrite(sys.argv[1], sys.argv[2], {("events-state", "events"): (envelope, slow)})
""")


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_sigint_and_sigterm_remove_the_temporary_directory(tmp_path: Path, sig: int) -> None:
    """After the cleanup the signal goes to the previous handler: the process ends by it."""
    out = tmp_path / "out"
    out.mkdir()
    status, err = signal_when_ready(
        [sys.executable, "-c", SLOW_REWRITE, str(EVENTS), str(out / "sp"), str(Path(__file__).parent)], "writing", sig,
        child_env(str(Path(__file__).parents[2]), str(Path(__file__).parent)),
        lambda: any(n.startswith(".sp.statemorph-tmp-") for n in leftovers(out)))
    assert status == -sig, err
    assert list(out.iterdir()) == []


# -- kill -9 -----------------------------------------------------------------------------------------

POINTS = ("*-*-*-*-*", "_metadata", "dst")
KILL_POINTS = kill_points(*POINTS)  # keyed-state files are named by UUIDs


@pytest.mark.parametrize("point", list(KILL_POINTS))
def test_kill_9_leaves_the_source_intact_and_the_destination_absent_or_complete(
        built: Path, tmp_path: Path, point: str) -> None:
    before = digest_tree(built)
    dst, schema = tmp_path / "dst", schema_file(tmp_path)
    env = child_env()
    kill_9_at(migrate_cmd(built, schema, dst), point, tmp_path, POINTS, env)
    assert digest_tree(built) == before, "the source savepoint changed"
    if dst.exists():  # complete, or not there at all
        assert read_all(dst) == BUILT_N
    finished = point == "renamed"  # killed at its point: the destination is there only once renamed
    assert dst.exists() == finished, point
    rerun = subprocess.run(migrate_cmd(built, schema, dst), capture_output=True, text=True, env=env, timeout=600)
    if finished:  # refused (never overwritten), but what the dead run left next to it is removed
        assert rerun.returncode == 2 and "already exists" in rerun.stderr, rerun.stderr
    else:
        assert rerun.returncode == 0, rerun.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dst", "new.toml"]
    assert read_all(dst) == BUILT_N
    assert digest_tree(built) == before


def test_a_failed_rewrite_is_typed_and_leaves_the_source_alone(tmp_path: Path) -> None:
    """A damaged source found while writing (a carried state file replaced by a FIFO) is one
    typed error; nothing is left next to the destination."""
    src = tmp_path / "src"
    shutil.copytree(SAVEPOINTS / "kinds-rocksdb-p1-files-mp256" / "savepoint", src)
    stray = src / "stray-file"
    os.mkfifo(stray)  # a FIFO next to _metadata is not carried (only regular files are)
    victim = next(p for p in src.iterdir() if p.name not in ("_metadata", "stray-file"))
    victim.unlink()
    os.mkfifo(victim)
    with pytest.raises(FlinkSavepointError, match="not a regular file"):
        rewrite(src, tmp_path / "out", {})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["src"]
