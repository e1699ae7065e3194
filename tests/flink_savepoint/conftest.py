"""Real Flink for the savepoint tests: the ci/flink driver, or a skip (a failure in CI).

``real_flink`` hands tests the ci/flink/flink.py module (it runs the savepoint generator and the
restore checker built by ci/flink/setup.sh). Where Java or the built classes are missing the
tests are skipped with the reason, except when STATEMORPH_REQUIRE_FLINK=1 (ci/test.sh sets it):
then a missing Flink fails the run, so CI can never pass by skipping them.
"""

from __future__ import annotations

import os
from types import ModuleType

import pytest
from flink_savepoint.flink_cases import load_driver


@pytest.fixture(scope="session")
def real_flink() -> ModuleType:
    driver = load_driver()
    try:
        driver.classpath()
    except driver.FlinkUnavailable as e:
        if os.environ.get("STATEMORPH_REQUIRE_FLINK") == "1":
            pytest.fail(f"STATEMORPH_REQUIRE_FLINK=1 but real Flink is unavailable: {e}")
        pytest.skip(f"real Flink unavailable: {e}")
    return driver
