"""Shared test configuration.

Hypothesis profiles: ``ci`` (default) is derandomized, so a CI run is reproducible and a red build
always means a code change; ``explore`` draws fresh random examples (run it locally to hunt bugs:
``HYPOTHESIS_PROFILE=explore ci/test.sh``); ``dev`` is a quick, smaller random run.
"""

import os
import shutil
import sys
from types import ModuleType

import pytest
from hypothesis import HealthCheck, settings
from tiers import TIERS

from statemorph import kernels

settings.register_profile(
    "ci", max_examples=60, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile(
    "explore", max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile("dev", max_examples=25, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)


@pytest.fixture(params=TIERS)
def tier(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """The test once per available kernel tier (``python``, ``native`` when compiled); the selected
    kernels are switched with monkeypatch, so nothing outlives the test."""
    monkeypatch.setattr(kernels, "KERNELS", kernels.tier(request.param))
    return str(request.param)


@pytest.fixture(scope="session", autouse=True)
def spark_scratch_in_basetemp(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Spark's scratch space (block managers, shuffle and spill files) for every JVM the tests start
    (the session below, ``--engine spark`` runs, local-cluster workers and executors) goes under
    pytest's base directory, removed with it (tmp_path_retention_policy), not loose in /tmp."""
    if "SPARK_LOCAL_DIRS" not in os.environ:
        os.environ["SPARK_LOCAL_DIRS"] = str(tmp_path_factory.mktemp("spark-local"))


@pytest.fixture(scope="session")
def spark():
    """One local[2] SparkSession for the whole test session (starting Spark costs ~10 s)."""
    pytest.importorskip("pyspark")
    if shutil.which("java") is None:
        pytest.skip("Spark needs a Java runtime")
    from statemorph.engine.spark import session

    s = session("local[2]", conf={"spark.sql.shuffle.partitions": "2", "spark.default.parallelism": "2",
                                  "spark.driver.memory": "1g"})
    yield s
    s.stop()


@pytest.fixture(scope="session")
def real_flink() -> ModuleType:
    """Real Flink: the ci/flink/flink.py driver (the savepoint generator and restore checker built by
    ci/flink/setup.sh), or a skip naming what is missing. With STATEMORPH_REQUIRE_FLINK=1 (ci/test.sh
    sets it) a missing Flink fails the run instead, so CI can never pass by skipping these tests."""
    from savepoint.flink.flink_cases import load_driver

    driver = load_driver()
    try:
        driver.classpath()
    except driver.FlinkUnavailable as e:
        if os.environ.get("STATEMORPH_REQUIRE_FLINK") == "1":
            pytest.fail(f"STATEMORPH_REQUIRE_FLINK=1 but real Flink is unavailable: {e}")
        pytest.skip(f"real Flink unavailable: {e}")
    return driver


@pytest.fixture(scope="module")
def s3_env():
    """moto's S3 server for one test module, and the standard ``AWS_*`` variables pointing at it
    (``tests/s3_server.py``); skipped without ``moto[server]`` (the test extra)."""
    pytest.importorskip("moto.server", reason="the S3 tests need moto[server] (the test extra)")
    from s3_server import s3_server

    with s3_server() as env:
        yield env


@pytest.fixture()
def bucket(s3_env: dict, request: pytest.FixtureRequest) -> str:
    """A fresh bucket per test on the ``s3_env`` server."""
    from s3_server import new_bucket

    return new_bucket(s3_env, request.node.name)
