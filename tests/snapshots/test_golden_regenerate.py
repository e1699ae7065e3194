"""The committed vectors are reproducible: running the generator against real Flink 2.3.0 again
gives byte-identical files. Needs java/javac and the pyflink jars (FLINK_LIB, else ci/flink-jars.sh locates them),
so it is marked ``slow`` and ``java`` and skipped where Flink is not installed."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
@pytest.mark.java
@pytest.mark.skipif(shutil.which("javac") is None, reason="needs javac (generate.sh finds the Flink jars)")
def test_generator_reproduces_the_committed_vectors(tmp_path: Path) -> None:
    # FLINK_LIB, when set, picks the jars; otherwise generate.sh locates them (ci/flink-jars.sh)
    env = dict(os.environ, GOLDEN_OUT=str(tmp_path / "out"), GOLDEN_BUILD=str(tmp_path / "build"))
    (tmp_path / "out").mkdir()
    subprocess.run([str(ROOT / "ci/golden/generate.sh")], env=env, check=True, capture_output=True, timeout=900)
    produced = sorted(p.name for p in (tmp_path / "out").glob("*.jsonl"))
    assert {"datastream.jsonl", "snapshots.jsonl", "rowdata.jsonl", "compat.jsonl", "migration.jsonl",
            "flink_rowdata.jsonl", "operator_ids.jsonl"} <= set(produced)
    for name in produced:
        committed = (ROOT / "tests/data/golden" / name).read_bytes()
        assert (tmp_path / "out" / name).read_bytes() == committed, f"{name} differs from a fresh Flink run"
