"""The ``statemorph`` process picks Arrow's jemalloc pool (flat memory over long runs) unless the
user named a pool; a program calling ``main`` in its own process keeps its own pool."""

from __future__ import annotations

import subprocess
import sys

import pyarrow as pa
import pytest
from processes import child_env

from statemorph.cli import main

POOL_AFTER_RUN = """
import sys
import pyarrow as pa
import statemorph.cli
cli = sys.modules["statemorph.cli.main"]
cli.main = lambda argv=None: print(pa.default_memory_pool().backend_name) or 0
sys.exit(cli.run())
"""


def _pool_of_a_statemorph_process(**env: str) -> str:
    out = subprocess.run([sys.executable, "-c", POOL_AFTER_RUN], env=child_env(**env), capture_output=True,
                         text=True, check=True, timeout=120)
    return out.stdout.strip()


def _has_jemalloc() -> bool:
    try:
        pa.jemalloc_memory_pool()
    except NotImplementedError:
        return False
    return True


@pytest.mark.skipif(not _has_jemalloc(), reason="this pyarrow is built without jemalloc")
def test_the_statemorph_process_uses_jemalloc():
    assert _pool_of_a_statemorph_process() == "jemalloc"


def test_a_pool_the_user_named_is_kept():
    assert _pool_of_a_statemorph_process(ARROW_DEFAULT_MEMORY_POOL="system") == "system"


def test_calling_main_leaves_the_callers_pool(tmp_path, capsys):
    before = pa.default_memory_pool().backend_name
    assert main(["inspect", str(tmp_path / "missing")]) == 2
    assert pa.default_memory_pool().backend_name == before
