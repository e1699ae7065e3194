"""Issue 14's scale proof, small: ``benchmarks/spark_cluster_flink.py`` at 50,000 entries.

A Flink savepoint with two subtask files (RocksDB layout, Snappy key groups) is migrated by the
Spark engine's key-group-range tasks on ``local-cluster[2,1,2048]`` (two worker JVMs, executors in
their own processes, which must have logged), then restored by real Flink 2.3 with the evolved
type, and a sample of keys spread over the whole key range is read back and compared with the
built values reshaped by field name. The same script, run by hand at 10 M entries, is the figure
in benchmarks/RESULTS.md; here it runs as a child process exactly as a user runs it. The sample
checker itself is shown to catch a wrong and a missing value."""

from __future__ import annotations

import copy
import importlib
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest
from processes import child_env

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parents[2]


def _script(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.syspath_prepend(str(ROOT))
    return importlib.import_module("benchmarks.spark_cluster_flink")


@pytest.mark.java
def test_two_subtask_files_migrated_on_local_cluster_restore_in_real_flink(real_flink: ModuleType,
                                                                           tmp_path: Path) -> None:
    pytest.importorskip("pyspark")
    if shutil.which("java") is None:
        pytest.skip("Spark needs a Java runtime")
    cmd = [sys.executable, "-m", "benchmarks.spark_cluster_flink", "--n", "50000", "--sample", "500",
           "--cache", str(tmp_path / "cache"), "--workdir", str(tmp_path)]
    proc = subprocess.run(cmd, cwd=ROOT, env=child_env(str(ROOT)), capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-5000:]
    assert "2 keyed-state files" in proc.stdout
    assert "on local-cluster[2,1,2048]" in proc.stdout
    assert "migrated on Spark: 50,000 entries" in proc.stdout
    assert "executor processes that logged: 2" in proc.stdout
    assert "probed 500 keys, 500 with an events value" in proc.stdout
    assert "OK: all 500 sampled keys (every 100th key index) hold the expected evolved value" in proc.stdout


def test_the_sample_check_reports_wrong_and_missing_values(monkeypatch: pytest.MonkeyPatch) -> None:
    script = _script(monkeypatch)
    F = script.F
    stride, sample = 10, 100
    idx = np.arange(sample, dtype=np.int64) * stride
    good = [{"key": k, "state": F.STATE, "value": script.reshape(v, script.NEW_FIELDS)}
            for k, v in zip(F.int_keys(idx).tolist(), F.events_struct(idx).to_pylist(), strict=True)]
    assert script.check_sample(good, stride, sample) == []
    assert good[3]["value"]["metadata"]["location"] is None and "location" in good[3]["value"]["metadata"]

    wrong = copy.deepcopy(good)
    wrong[5]["value"]["metadata"]["userId"] += 1
    problems = script.check_sample(wrong, stride, sample)
    assert len(problems) == 1 and f"key {good[5]['key']}: Flink read" in problems[0]

    reordered = copy.deepcopy(good)
    meta = reordered[7]["value"]["metadata"]
    reordered[7]["value"]["metadata"] = dict(reversed(list(meta.items())))
    assert len(script.check_sample(reordered, stride, sample)) == 1

    missing = good[:40] + good[41:]
    assert script.check_sample(missing, stride, sample) == [
        f"key {good[40]['key']}: no events value after the restore"]
