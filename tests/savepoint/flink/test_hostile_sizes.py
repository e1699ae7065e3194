"""Memory on hostile sizes (issue 24, item 4): ``inspect`` and ``convert`` read a keyed-state
stream as ``migrate`` does, one slice of about a MiB at a time, so a key group that claims
gigabytes (a sparse file) or a few MB of Snappy chunks that decompress to hundreds cost them a
slice, not the claim; each is refused with one typed line and exit status 4. A ``_metadata``
parses into about its size where it is offsets, and one of more records than any job writes is
refused before they are made.

Memory is measured, not timed: a fresh child Python runs the verb through ``statemorph.cli.main``
after the same verb on the valid savepoint (imports, kernels, allocator arenas), and reports how
far its peak RSS (``/proc/self/status`` VmHWM, reset through ``/proc/self/clear_refs``) rose
above its RSS before the measured run."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from processes import child_env
from savepoint.flink.format_helpers import cases
from savepoint.flink.hostile_sizes import (
    COMPRESSED,
    UNCOMPRESSED,
    ZERO_CHUNK,
    metadata_of_offsets,
    metadata_of_records,
    snappy_bomb,
    sparse_entry,
    sparse_key_group,
    with_metadata,
)

from statemorph.errors import ExitCode
from statemorph.savepoint.flink.key_group_scan import MAX_ENTRY_BYTES
from statemorph.savepoint.flink.metadata import MAX_METADATA_RECORDS

pytestmark = [
    pytest.mark.skipif(not cases(), reason="no committed real-Flink savepoints"),
    pytest.mark.skipif(not Path("/proc/self/clear_refs").exists(), reason="needs Linux /proc (VmHWM, clear_refs)"),
]

ALLOWED_GROWTH_MIB = 64
"""What a run may add to the child's RSS: a slice (1 MiB, a compressed piece's 5 MiB at most)
and allocator noise. Reading the claim whole costs 2 GiB (sparse) or 2 x 256 MiB (the bomb)."""
BOMB_CHUNKS = 4096
"""12 MB of Snappy chunks of zeros: 256 MiB once decompressed."""

PEAK = """
import json, sys

def status(field):
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith(field + ":"))

def measure(fn):
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # the peak RSS (VmHWM) starts again from the current RSS
    base = status("VmRSS")
    result = fn()
    return result, status("VmHWM") - base
"""
CHILD = PEAK + """
import contextlib, io
from statemorph.cli.main import main

def run(argv):
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()) as err:
        rc = main(argv)
    return rc, err.getvalue()

warm, argv = json.loads(sys.argv[1]), json.loads(sys.argv[2])
assert run(warm)[0] == 0
(rc, err), grew = measure(lambda: run(argv))
print(json.dumps({"rc": rc, "stderr": err, "growth_kib": grew}))
"""
PARSE = PEAK + """
from statemorph.savepoint.flink import parse_metadata

parse_metadata(open(sys.argv[1], "rb").read())  # imports, warm
data = open(sys.argv[2], "rb").read()
meta, grew = measure(lambda: parse_metadata(data))
print(json.dumps({"growth_kib": grew}))
"""


def _child(code: str, *args: str) -> dict[str, Any]:
    p = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                       env=child_env(ARROW_DEFAULT_MEMORY_POOL="jemalloc"), timeout=300)
    assert p.returncode == 0, p.stderr
    result: dict[str, Any] = json.loads(p.stdout.strip().splitlines()[-1])
    return result


def measured(warm: list[str], argv: list[str]) -> tuple[int, str, float]:
    """(exit status, stderr, MiB the peak RSS rose above the RSS before) of ``statemorph argv``."""
    r = _child(CHILD, json.dumps(warm), json.dumps(argv))
    return r["rc"], r["stderr"], r["growth_kib"] / 1024


def verb(name: str, sp: Path, tmp: Path, out: str) -> list[str]:
    return ["inspect", "-q", str(sp)] if name == "inspect" else ["convert", "-q", str(sp), "--out", str(tmp / out)]


@pytest.mark.parametrize("size", [2 << 30, 256 << 30], ids=["2GiB", "256GiB"])
@pytest.mark.parametrize("name", ["inspect", "convert"])
def test_a_sparse_key_group_costs_a_slice_whatever_it_claims(tmp_path: Path, name: str, size: int) -> None:
    """256 GiB is 262,144 pieces of a slice: a cut that made one hand-over object per piece before
    reading took 800 MiB and 5 s for them (a terabyte, 3 GB and 20 s); they are made as the pieces
    reach them."""
    sp = sparse_key_group(tmp_path / "sparse", size)
    rc, err, grew = measured(verb(name, UNCOMPRESSED, tmp_path, "warm"), verb(name, sp, tmp_path, "out"))
    assert rc == ExitCode.DAMAGED_SAVEPOINT, err
    assert err.count("\n") == 1 and "bytes after the end of the key group" in err, err
    assert grew < ALLOWED_GROWTH_MIB, grew


@pytest.mark.parametrize(("name", "size", "key_length", "refusal"), [
    ("inspect", 64 << 20, 100 << 20, "runs past the end of the key group"),
    ("convert", 64 << 20, 100 << 20, "runs past the end of the key group"),
    ("inspect", 2 << 30, 1 << 30, f"declares more than {MAX_ENTRY_BYTES:,} bytes"),
    ("convert", 2 << 30, 1 << 30, f"declares more than {MAX_ENTRY_BYTES:,} bytes"),
])
def test_an_entry_claiming_too_much_is_refused_before_it_is_read(tmp_path: Path, name: str, size: int,
                                                                 key_length: int, refusal: str) -> None:
    """The entry outgrows every slice; its key alone claims more than its key group holds, or
    (a 2 GiB key group of zeros) more than one entry may hold: refused from the claim, without
    reading (and holding) the key group up to there."""
    sp = sparse_key_group(tmp_path / "claim", size, key_length)
    rc, err, grew = measured(verb(name, UNCOMPRESSED, tmp_path, "warm"), verb(name, sp, tmp_path, "out"))
    assert rc == ExitCode.DAMAGED_SAVEPOINT, err
    assert err.count("\n") == 1 and refusal in err, err
    assert grew < ALLOWED_GROWTH_MIB, grew


@pytest.mark.parametrize("name", ["inspect", "convert"])
def test_a_large_entry_costs_it_at_most_twice(tmp_path: Path, name: str) -> None:
    """An entry larger than a slice (a 64 MiB key, the run's last, and a 16 MiB value, in a
    sparse 512 MiB key group) is held whole: the window grown for it (its predecessor, grown for
    the key alone, freed) and, for ``convert``, one copy of its key and value. The reader held
    it about five times (a window grown to twice the entry, the previous window, three copies of
    a flagged key), which took the ``sparse-and-bomb`` fuzz worker to 1.4 GB."""
    key, value = 64 << 20, 16 << 20
    sp = sparse_entry(tmp_path / "entry", key, value, 512 << 20)
    rc, err, grew = measured(verb(name, UNCOMPRESSED, tmp_path, "warm"), verb(name, sp, tmp_path, "out"))
    assert rc == ExitCode.DAMAGED_SAVEPOINT, err
    assert err.count("\n") == 1, err
    assert grew < 2 * (key + value) / (1 << 20) + ALLOWED_GROWTH_MIB, grew


@pytest.mark.parametrize("name", ["inspect", "convert"])
def test_snappy_chunks_of_zeros_cost_a_slice(tmp_path: Path, name: str) -> None:
    sp = snappy_bomb(tmp_path / "bomb", BOMB_CHUNKS)
    assert sum(f.stat().st_size for f in sp.iterdir()) < len(ZERO_CHUNK) * BOMB_CHUNKS + (1 << 20)
    rc, err, grew = measured(verb(name, COMPRESSED, tmp_path, "warm"), verb(name, sp, tmp_path, "out"))
    assert rc == ExitCode.DAMAGED_SAVEPOINT, err
    assert err.count("\n") == 1 and "key length 0" in err, err
    assert grew < ALLOWED_GROWTH_MIB, grew


def test_key_group_offsets_parse_into_about_their_own_size(tmp_path: Path) -> None:
    """40 keyed operators of 32,768 offsets (10 MiB): a list of ints held 5x that."""
    data = metadata_of_offsets(40)
    (tmp_path / "_metadata").write_bytes(data)
    grew = _child(PARSE, str(UNCOMPRESSED / "_metadata"), str(tmp_path / "_metadata"))["growth_kib"] / 1024
    assert grew < 1.5 * len(data) / (1 << 20), grew


def test_a_metadata_of_more_records_than_any_job_holds_is_refused_before_they_are_made(tmp_path: Path) -> None:
    """29 MB of 7-byte operator-state entries: each would be ~150 bytes of Python objects."""
    data = metadata_of_records(MAX_METADATA_RECORDS)
    sp = with_metadata(tmp_path / "records", data)
    rc, err, grew = measured(["inspect", "-q", str(UNCOMPRESSED)], ["inspect", "-q", str(sp)])
    assert rc == ExitCode.DAMAGED_SAVEPOINT, err
    assert err.count("\n") == 1 and f"more than the {MAX_METADATA_RECORDS:,} statemorph reads" in err, err
    assert grew < 2.5 * len(data) / (1 << 20), grew  # the file read, nothing made of it
