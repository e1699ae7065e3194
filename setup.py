"""Build the compiled tier: one extension per ``_native/*.pyx``, named ``statemorph.kernels.<stem>``.

Cython is a hard requirement (declared in pyproject's build-system); a missing compiler must fail
the build loudly, never produce a package that silently runs only the Python tier.

Before Cython runs, the kernel ABI (``src/statemorph/kernels/abi.py``) is rendered into
``_native/abi_<family>.pxi``, which the kernels include: the numbers are declared once.

Environment switches:
  STATEMORPH_BUILD_DEBUG=1  -O0 -g, Cython bounds/wraparound checks on
  STATEMORPH_SANITIZE=1     AddressSanitizer + UBSan (run tests with LD_PRELOAD=libasan.so)
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

from Cython.Build import cythonize
from setuptools import Extension, setup

HERE = Path(__file__).parent
debug = os.environ.get("STATEMORPH_BUILD_DEBUG") == "1"


def write_abi_includes() -> None:
    """Render every ABI family into ``_native/abi_<family>.pxi`` (rewritten only when it changes,
    so an unchanged ABI does not force a rebuild)."""
    spec = importlib.util.spec_from_file_location("_statemorph_abi", HERE / "src/statemorph/kernels/abi.py")
    assert spec is not None and spec.loader is not None
    abi = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(abi)
    for family in abi.FAMILIES:
        path = HERE / "_native" / f"abi_{family}.pxi"
        text = abi.render_pxi(family)
        if not path.exists() or path.read_text() != text:
            path.write_text(text)


write_abi_includes()
sanitize = os.environ.get("STATEMORPH_SANITIZE") == "1"

# The kernels' inner loops run a handful of iterations (fields of a row, words of a string): gcc's
# loop vectorizer and memset/memcpy idiom recognition wrap each in runtime alias checks, prologues
# or library calls that cost more than the loop (measured: ~5% of the migrate walk's instructions).
compile_args = ["-O0", "-g"] if debug else ["-O3", "-fno-tree-loop-distribute-patterns", "-fno-tree-vectorize"]
link_args: list[str] = []
if sanitize:
    compile_args += ["-fsanitize=address,undefined", "-fno-omit-frame-pointer", "-g"]
    link_args += ["-fsanitize=address,undefined"]

extensions = [
    Extension(
        f"statemorph.kernels.{pyx.stem}",
        [str(pyx.relative_to(HERE))],
        include_dirs=["_native"],
        extra_compile_args=compile_args,
        extra_link_args=link_args,
        define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")],
    )
    for pyx in sorted((HERE / "_native").glob("*.pyx"))
]

setup(
    ext_modules=cythonize(
        extensions,
        language_level=3,
        compiler_directives={
            "boundscheck": debug,
            "wraparound": debug,
            "cdivision": True,
            "initializedcheck": debug,
            "embedsignature": True,
        },
        include_path=["_native"],
    ),
)
