"""Every code block of the README runs (or, where it cannot run here, says so visibly and is parsed).

Blocks run in README order in one working directory that sees the repository's tests/ and ci/, as
a user who pasted them one after another into one shell or a fresh ``python`` would: bash blocks with
``set -e``, the installed ``statemorph`` first on PATH and the shell variables of the earlier bash
blocks, python blocks in a new interpreter each.
The rules for annotations are in :mod:`readme_blocks`. The Flink story ends with real Flink
restoring the migrated savepoint; every value must read back evolved.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from docs.readme_blocks import LANGUAGES, NOT_RUN, PROGRAMS, README, ROOT, Block, readme_blocks
from processes import child_env
from savepoint.flink.flink_cases import EVOLVED_EVENTS_FIELDS, reshape
from savepoint.flink.format_helpers import expected, hashable

from statemorph.schema_file import parse_schema

BLOCKS = readme_blocks()
PROGRAM_BLOCKS = [b for b in BLOCKS if b.lang in PROGRAMS]
RESTORED_CASE = ROOT / "tests" / "data" / "flink_savepoints" / "events-rocksdb-p2-files-snappy"


def test_every_fence_is_a_known_block() -> None:
    text = README.read_text(encoding="utf-8")
    fences = sum(1 for line in text.splitlines() if line.strip().startswith("```"))
    assert fences == 2 * len(BLOCKS), "a fence the block parser did not pair up"
    assert {b.lang for b in BLOCKS} <= set(LANGUAGES), [b.id for b in BLOCKS if b.lang not in LANGUAGES]
    for b in PROGRAM_BLOCKS:
        assert b.not_run_reason != "", f"{b.id}: '{NOT_RUN}' without a reason"
        assert b.needs in (None, "flink", "spark"), f"{b.id}: unknown need {b.needs!r}"
    # the story and the APIs are run, not merely parsed
    run = "\n".join(b.code for b in PROGRAM_BLOCKS if b.not_run_reason is None)
    for needle in ("statemorph inspect", "statemorph check", "statemorph migrate", "flink.py restore",
                   "arrow.migrate", "engine.migrate_savepoint", "sms.migrate_savepoint", "mapInArrow"):
        assert needle in run


@pytest.mark.parametrize("block", [b for b in PROGRAM_BLOCKS if b.not_run_reason is not None], ids=lambda b: b.id)
def test_blocks_not_run_still_parse(block: Block) -> None:
    if block.lang == "python":
        compile(block.code, f"README.md:{block.line}", "exec")
    else:
        proc = subprocess.run(["bash", "-n"], input=block.code, capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize("block", [b for b in BLOCKS if b.lang == "toml"], ids=lambda b: b.id)
def test_toml_blocks_are_schema_files(block: Block) -> None:
    schema = parse_schema(block.code, f"README.md:{block.line}")
    assert schema.states


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One directory for the whole README, with the repository's tests/ and ci/ beside the outputs."""
    d = tmp_path_factory.mktemp("readme")
    for name in ("tests", "ci"):
        (d / name).symlink_to(ROOT / name)
    return d


def _check_restored(workdir: Path) -> None:
    """Real Flink read every value of the migrated savepoint back, evolved to the new row type."""
    got = {(hashable(e["key"]), e["state"]): e["value"]
           for e in map(json.loads, (workdir / "restored.jsonl").read_text(encoding="utf-8").splitlines())}
    assert got == {k: reshape(v, EVOLVED_EVENTS_FIELDS) for k, v in expected(RESTORED_CASE).items()}


#: one shell session across the bash blocks: each starts with the variables the earlier ones set
#: (``$SP`` and ``$NEW`` of the Flink story) and hands its own on
SHELL_IN = "compgen -v > .readme-vars-before\n[ ! -f .readme-shell ] || source .readme-shell\n"
SHELL_OUT = ("\nREADME_VARS=$(compgen -v | grep -vxF -f .readme-vars-before || true)\n"
             "[ -z \"$README_VARS\" ] || declare -p $README_VARS > .readme-shell\n")

#: what a block's output must show, beyond its exit status (keyed by a command the block runs)
AFTER: dict[str, Callable[[Path, str], None]] = {
    "statemorph check": lambda d, out: None if "restorable after migration" in out else pytest.fail(out),
    "flink.py restore": lambda d, out: _check_restored(d),
}


@pytest.mark.parametrize("block", [b for b in PROGRAM_BLOCKS if b.not_run_reason is None], ids=lambda b: b.id)
def test_block_runs(block: Block, workdir: Path, request: pytest.FixtureRequest) -> None:
    if block.needs == "flink":
        request.getfixturevalue("real_flink")
    elif block.needs == "spark":
        pytest.importorskip("pyspark")
        if shutil.which("java") is None:
            pytest.skip("README block needs Spark, and Spark needs a Java runtime")
    bindir = str(Path(sys.executable).parent)
    env = child_env(PATH=f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}")
    if block.lang == "bash":
        cmd = ["bash", "-e", "-o", "pipefail", "-c", SHELL_IN + block.code + SHELL_OUT]
    else:
        script = workdir / f"readme-{block.line}.py"
        script.write_text(block.code, encoding="utf-8")
        cmd = [sys.executable, script.name]
    proc = subprocess.run(cmd, cwd=workdir, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"README.md:{block.line} failed:\n{proc.stdout}\n{proc.stderr}"
    for needle, check in AFTER.items():
        if needle in block.code:
            check(workdir, proc.stdout)
