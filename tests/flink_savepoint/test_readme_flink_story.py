"""The README's "Migrate a real Flink savepoint" section runs as written: its bash blocks, in a
fresh directory that sees the repository's tests/ and ci/, with the installed ``statemorph`` on
PATH. The migrated savepoint is restored by real Flink and every value reads back evolved."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
from flink_savepoint.flink_cases import EVOLVED_EVENTS_FIELDS, ROOT, reshape
from flink_savepoint.format_helpers import expected, hashable

SECTION = "## Migrate a real Flink savepoint"


def readme_blocks() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    start = text.index(SECTION)
    end = text.index("\n## ", start + len(SECTION))
    return re.findall(r"```bash\n(.*?)```", text[start:end], flags=re.S)


def test_the_section_has_the_story() -> None:
    script = "\n".join(readme_blocks())
    for verb in ("statemorph inspect", "statemorph check", "statemorph migrate", "flink.py restore"):
        assert verb in script


@pytest.mark.java
def test_readme_flink_story_runs(real_flink: ModuleType, tmp_path: Path) -> None:
    for name in ("tests", "ci"):
        (tmp_path / name).symlink_to(ROOT / name)
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    # the check step exits 1 (migration needed) by design: run the blocks without `set -e`
    proc = subprocess.run(["bash", "-c", "\n".join(readme_blocks())], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "restorable after migration" in proc.stdout
    case = ROOT / "tests" / "data" / "flink_savepoints" / "events-rocksdb-p2-files-snappy"
    got = {(hashable(e["key"]), e["state"]): e["value"]
           for e in map(json.loads, (tmp_path / "restored.jsonl").read_text(encoding="utf-8").splitlines())}
    want = {k: reshape(v, EVOLVED_EVENTS_FIELDS) for k, v in expected(case).items()}
    assert got == want
