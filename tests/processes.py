"""How a test starts a child Python that imports the same statemorph as the test process.

CI installs the package into the venv and runs the suite against that install (the checkout's
``src/`` holds no compiled kernels there); a developer runs with ``PYTHONPATH=src`` after an in-place
build. A child pointed at ``src/`` by hand would, under CI, import uncompiled sources and warn about a
missing compiled tier, so children get the directory the parent's ``statemorph`` came from."""

from __future__ import annotations

import os
import site
from pathlib import Path

import statemorph

#: the ``sys.path`` entry this process imported statemorph from (site-packages or the checkout's src)
STATEMORPH_PATH = str(Path(statemorph.__file__).resolve().parents[1])
#: the import root of the test helpers (``pythonpath`` in pyproject.toml), so a child script can
#: import them (strategies, processes, a subject's helper modules) as the tests do
TESTS = str(Path(__file__).resolve().parent)


def child_env(*first: str, **extra: str) -> dict[str, str]:
    """This process's environment with PYTHONPATH = ``first`` entries, statemorph's home, the tests."""
    return {**os.environ, **extra, "PYTHONPATH": os.pathsep.join([*first, STATEMORPH_PATH, TESTS])}


def mypy_env() -> dict[str, str]:
    """The environment of a child ``mypy`` that type-checks against this statemorph: an installed
    one mypy finds by itself (and refuses site-packages in MYPYPATH); a checkout's src/ goes on
    MYPYPATH."""
    installed = {str(Path(p).resolve()) for p in site.getsitepackages()}
    return child_env() if STATEMORPH_PATH in installed else child_env(MYPYPATH=STATEMORPH_PATH)
