"""One local[2] SparkSession for the whole test session (starting Spark costs ~10 s)."""

from __future__ import annotations

import shutil

import pytest


@pytest.fixture(scope="session")
def spark():
    pytest.importorskip("pyspark")
    if shutil.which("java") is None:
        pytest.skip("Spark needs a Java runtime")
    from statemorph.spark import session

    s = session("local[2]", conf={"spark.sql.shuffle.partitions": "2", "spark.default.parallelism": "2",
                                  "spark.driver.memory": "1g"})
    yield s
    s.stop()
