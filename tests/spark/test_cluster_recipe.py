"""docs/spark.md's recipe on a real multi-process cluster: statemorph (compiled) and its dependencies
packed with venv-pack, shipped with ``--archives``, and docs/examples/spark_migrate_job.py run by
``spark-submit --master local-cluster[2,1,1024]`` (a master and two worker JVMs, each executor its
own process with its own Python workers).

The executors' interpreter is the base Python, which has no statemorph, and no PYTHONPATH reaches
them but the archive's, so the migration can only succeed if the archive delivered statemorph. The
environment is built without the network: a venv (``--copies``) holding the statemorph this test
imports and the installed distributions of its runtime requirements (what ``pip install
"statemorph[spark]"`` puts there, pyspark excepted: the cluster's Spark provides it). The result
must equal the local engine's, and no log line of the driver or the executors may be an ERROR."""

from __future__ import annotations

import importlib.metadata as md
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest
from processes import STATEMORPH_PATH, child_env

from statemorph import serializers as S
from statemorph.engine import migrate_savepoint, read_state_table, write_state
from statemorph.state import ValueStateDescriptor

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parents[2]
JOB = ROOT / "docs" / "examples" / "spark_migrate_job.py"
EVENTS = "ROW<eventId BIGINT, metadata ROW<userId INT, `timestamp` BIGINT, deviceType STRING>>"
EVOLVED = "ROW<eventId BIGINT, metadata ROW<deviceType STRING, userId INT, `timestamp` BIGINT, location STRING>>"
#: statemorph[spark] without pyspark (the cluster's Spark puts its own pyspark on the workers' path)
TOP_LEVEL = ("numpy", "pyarrow", "cramjam", "pandas")


#: The one ERROR line a healthy standalone application leaves: when the application ends, the master
#: has each worker stop its executor processes with SIGTERM, and an executor still shutting down
#: logs the signal at ERROR level (Spark's SignalUtils, on every standalone cluster). It says nothing
#: about the job; any other ERROR line, on the driver or an executor, fails the test.
TERMINATED = re.compile(r"ERROR CoarseGrainedExecutorBackend: RECEIVED SIGNAL TERM$")


def _closure(names: tuple[str, ...]) -> list[str]:
    """The installed distributions ``names`` need, transitively (markers evaluated here)."""
    from packaging.requirements import Requirement

    seen: dict[str, None] = {}
    todo = list(names)
    while todo:
        name = todo.pop()
        key = name.lower().replace("_", "-")
        if key in seen or key == "pyspark":
            continue
        seen[key] = None
        for spec in md.requires(name) or []:
            req = Requirement(spec)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append(req.name)
    return list(seen)


def build_env(root: Path) -> Path:
    """A relocatable-enough venv (interpreter copied, not linked) with statemorph and its deps."""
    env = root / "statemorph-env"
    subprocess.run([sys.executable, "-m", "venv", "--copies", "--without-pip", str(env)], check=True,
                   env=child_env())
    site = Path(subprocess.run([str(env / "bin" / "python"), "-c",
                                "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    shutil.copytree(Path(STATEMORPH_PATH) / "statemorph", site / "statemorph",
                    ignore=shutil.ignore_patterns("__pycache__"))
    for name in _closure(TOP_LEVEL):
        dist = md.distribution(name)
        for f in dist.files or []:
            src = Path(str(dist.locate_file(f)))
            if ".." in f.parts or not src.is_file():
                continue  # scripts outside site-packages
            dst = site / f
            dst.parent.mkdir(parents=True, exist_ok=True)
            try:
                os.link(src, dst)  # the same bytes as a copy, without the disk traffic
            except OSError:
                shutil.copy2(src, dst)
    return env


def private_spark_home(pyspark_dir: Path, home: Path) -> Path:
    """pyspark's Spark (links to its bin, jars, python...) with a ``work`` directory of its own:
    a local-cluster worker keeps its executors' directories and logs in ``$SPARK_HOME/work``, which
    must not land in the installed pyspark."""
    home.mkdir()
    for entry in pyspark_dir.iterdir():
        if entry.name != "work":
            (home / entry.name).symlink_to(entry)
    (home / "work").mkdir()
    return home


def base_python() -> str:
    return getattr(sys, "_base_executable", sys.executable)


def test_recipe_on_local_cluster(tmp_path: Path) -> None:
    pyspark = pytest.importorskip("pyspark")
    venv_pack = pytest.importorskip("venv_pack", reason="the recipe packs the environment with venv-pack")
    if shutil.which("java") is None:
        pytest.skip("Spark needs a Java runtime")
    clean = {k: v for k, v in child_env().items() if k not in ("PYTHONPATH", "PYSPARK_PYTHON")}
    probe = subprocess.run([base_python(), "-c", "import statemorph"], env=clean, capture_output=True)
    assert probe.returncode != 0, "the base interpreter has statemorph: the test could not tell the archive's use"

    env = build_env(tmp_path)
    archive = tmp_path / "statemorph-env.tar"
    venv_pack.pack(prefix=str(env), output=str(archive), format="tar")

    old, new = S.RowDataSerializer(EVENTS), S.RowDataSerializer(EVOLVED)
    keys = list(range(2000))
    table = pa.table({"key": keys, "eventId": [k * 3 for k in keys],
                      "metadata": [{"userId": k % 7, "timestamp": 1_700_000_000_000 + k,
                                    "deviceType": None if k % 5 == 0 else "phone"} for k in keys]})
    src = write_state(tmp_path / "sp", table, name="events", key_serializer=S.LongSerializer(),
                      value_serializer=old, value=["eventId", "metadata"])
    schema = tmp_path / "new.toml"
    schema.write_text(f'[states.events]\ntype = "{EVOLVED}"\n', encoding="utf-8")

    spark_home = private_spark_home(Path(pyspark.__file__).parent, tmp_path / "spark-home")
    run_env = {**clean, "SPARK_HOME": str(spark_home)}
    cmd = [str(spark_home / "bin" / "spark-submit"), "--master", "local-cluster[2,1,1024]",
           "--archives", f"{archive}#env",
           "--conf", f"spark.pyspark.python={base_python()}",
           "--conf", f"spark.executorEnv.PYTHONPATH=./env/lib/python{sys.version_info[0]}.{sys.version_info[1]}"
                     "/site-packages",
           "--conf", f"spark.pyspark.driver.python={env / 'bin' / 'python'}",
           "--conf", "spark.executor.memory=512m",
           str(JOB), str(src), str(schema), str(tmp_path / "out")]
    proc = subprocess.run(cmd, cwd=tmp_path, env=run_env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-5000:]
    assert "2,000 entries migrated" in proc.stdout

    work = spark_home / "work"
    logs = {"driver": proc.stderr} | {str(p.relative_to(work)): p.read_text(errors="replace")
                                      for p in work.rglob("stderr")}
    assert any("/" in name for name in logs), "no executor log: the job did not run on the cluster's executors"
    errors = {name: [ln for ln in text.splitlines() if re.search(r"\bERROR\b", ln) and not TERMINATED.search(ln)]
              for name, text in logs.items()}
    assert not any(errors.values()), errors

    local = tmp_path / "local"
    migrate_savepoint(src, local, [ValueStateDescriptor("events", new)])
    assert read_state_table(tmp_path / "out", "events").sort_by("key").equals(
        read_state_table(local, "events").sort_by("key"))
