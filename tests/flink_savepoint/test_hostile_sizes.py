"""Memory on hostile sizes (issue 24, item 4): ``inspect`` and ``convert`` read a keyed-state
stream as ``migrate`` does, one slice of about a MiB at a time, so a key group that claims
gigabytes (a sparse file) or a few MB of Snappy chunks that decompress to hundreds cost them a
slice, not the claim; each is refused with one typed line and exit status 4.

Memory is measured, not timed: a fresh child Python runs the verb through ``statemorph.cli.main``
after the same verb on the valid savepoint (imports, kernels, allocator arenas), and reports how
far its peak RSS (``/proc/self/status`` VmHWM, reset through ``/proc/self/clear_refs``) rose
above its RSS before the measured run."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from flink_savepoint.format_helpers import cases
from flink_savepoint.hostile_sizes import COMPRESSED, UNCOMPRESSED, ZERO_CHUNK, snappy_bomb, sparse_key_group
from processes import child_env

from statemorph.errors import ExitCode

pytestmark = [
    pytest.mark.skipif(not cases(), reason="no committed real-Flink savepoints"),
    pytest.mark.skipif(not Path("/proc/self/clear_refs").exists(), reason="needs Linux /proc (VmHWM, clear_refs)"),
]

ALLOWED_GROWTH_MIB = 64
"""What a run may add to the child's RSS: a slice (1 MiB, a compressed piece's 5 MiB at most)
and allocator noise. Reading the claim whole costs 2 GiB (sparse) or 2 x 256 MiB (the bomb)."""
BOMB_CHUNKS = 4096
"""12 MB of Snappy chunks of zeros: 256 MiB once decompressed."""

CHILD = """
import contextlib, io, json, sys
from statemorph.cli.main import main

def status(field):
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith(field + ":"))

def run(argv):
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()) as err:
        rc = main(argv)
    return rc, err.getvalue()

warm, argv = json.loads(sys.argv[1]), json.loads(sys.argv[2])
assert run(warm)[0] == 0
with open("/proc/self/clear_refs", "w") as f:
    f.write("5")  # the peak RSS (VmHWM) starts again from the current RSS
base = status("VmRSS")
rc, err = run(argv)
print(json.dumps({"rc": rc, "stderr": err, "growth_kib": status("VmHWM") - base}))
"""


def measured(warm: list[str], argv: list[str]) -> tuple[int, str, float]:
    """(exit status, stderr, MiB the peak RSS rose above the RSS before) of ``statemorph argv``."""
    p = subprocess.run([sys.executable, "-c", CHILD, json.dumps(warm), json.dumps(argv)], capture_output=True,
                       text=True, env=child_env(ARROW_DEFAULT_MEMORY_POOL="jemalloc"), timeout=300)
    assert p.returncode == 0, p.stderr
    r = json.loads(p.stdout.strip().splitlines()[-1])
    return r["rc"], r["stderr"], r["growth_kib"] / 1024


def verb(name: str, sp: Path, tmp: Path, out: str) -> list[str]:
    return ["inspect", "-q", str(sp)] if name == "inspect" else ["convert", "-q", str(sp), "--out", str(tmp / out)]


@pytest.mark.parametrize("name", ["inspect", "convert"])
def test_a_sparse_key_group_of_two_gib_costs_a_slice(tmp_path: Path, name: str) -> None:
    sp = sparse_key_group(tmp_path / "sparse")
    rc, err, grew = measured(verb(name, UNCOMPRESSED, tmp_path, "warm"), verb(name, sp, tmp_path, "out"))
    assert rc == ExitCode.DAMAGED_SAVEPOINT, err
    assert err.count("\n") == 1 and "bytes after the end of the key group" in err, err
    assert grew < ALLOWED_GROWTH_MIB, grew


@pytest.mark.parametrize("name", ["inspect", "convert"])
def test_an_entry_claiming_more_than_its_key_group_is_refused_before_it_is_read(tmp_path: Path, name: str) -> None:
    """The entry outgrows every slice; its key alone claims more than the 2 GiB key group holds:
    refused from the claim, without reading (and holding) the key group up to its end."""
    sp = sparse_key_group(tmp_path / "claim", key_length=(2 << 30) - 16)
    rc, err, grew = measured(verb(name, UNCOMPRESSED, tmp_path, "warm"), verb(name, sp, tmp_path, "out"))
    assert rc == ExitCode.DAMAGED_SAVEPOINT, err
    assert err.count("\n") == 1 and "runs past the end of the key group" in err, err
    assert grew < ALLOWED_GROWTH_MIB, grew


@pytest.mark.parametrize("name", ["inspect", "convert"])
def test_snappy_chunks_of_zeros_cost_a_slice(tmp_path: Path, name: str) -> None:
    sp = snappy_bomb(tmp_path / "bomb", BOMB_CHUNKS)
    assert sum(f.stat().st_size for f in sp.iterdir()) < len(ZERO_CHUNK) * BOMB_CHUNKS + (1 << 20)
    rc, err, grew = measured(verb(name, COMPRESSED, tmp_path, "warm"), verb(name, sp, tmp_path, "out"))
    assert rc == ExitCode.DAMAGED_SAVEPOINT, err
    assert err.count("\n") == 1 and "key length 0" in err, err
    assert grew < ALLOWED_GROWTH_MIB, grew
