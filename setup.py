"""Build the compiled tier: one extension per ``kernels/_native/*.pyx``, named ``statemorph.kernels.<stem>``.

Cython is a hard requirement (declared in pyproject's build-system), and so is a C compiler: a
build without either stops with a message saying what to install, never producing a package that
silently runs only the (about 25x slower) Python tier. The sdist carries the .pyx/.pxd/.pxi sources
(MANIFEST.in), not generated C, so an install from it always compiles the kernels.

Before Cython runs, the kernel ABI (``src/statemorph/kernels/abi.py``) is rendered into
``kernels/_native/abi_<family>.pxi``, which the kernels include: the numbers are declared once. The type
declarations of each compiled module (``src/statemorph/kernels/<stem>.pyi``, shipped for users'
type-checkers) are rendered from its Python twin, whose annotated functions they re-export: a new
kernel pair needs no hand-written stub.

Environment switches:
  STATEMORPH_BUILD_DEBUG=1  -O0 -g, Cython bounds/wraparound checks on, symbols kept
  STATEMORPH_SANITIZE=1     AddressSanitizer + UBSan (run tests with LD_PRELOAD=libasan.so)
Release builds (the default) link with -s on Linux, so wheels ship stripped .so files.
"""

from __future__ import annotations

import ast
import importlib.util
import os
import shutil
import sys
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

try:
    from Cython.Build import cythonize
except ImportError:
    sys.exit(
        "statemorph: Cython 3 is required to build the compiled kernels and was not found.\n"
        "  pip builds in an isolated environment with Cython installed (pyproject.toml build-system);\n"
        "  with --no-build-isolation, install it first: pip install 'Cython>=3.0' setuptools wheel"
    )

HERE = Path(__file__).parent
NATIVE_DIR = "src/statemorph/kernels/_native"
"""The Cython sources, beside their Python twins' package (relative: setuptools wants relative paths)."""
NATIVE = HERE / NATIVE_DIR
debug = os.environ.get("STATEMORPH_BUILD_DEBUG") == "1"
NO_COMPILER = (
    "statemorph: no working C compiler ({detail}). statemorph's kernels are compiled (Cython) and the\n"
    "  package is not installed without them. Install a compiler (Debian/Ubuntu: apt-get install gcc\n"
    "  python3-dev; Fedora: dnf install gcc python3-devel) or install a prebuilt wheel (pip install\n"
    "  --only-binary statemorph statemorph)."
)


JOBS = max(1, min(len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1, 8))
"""Kernels compiled at once (Cython, then the C compiler): one per usable core. The six kernels
compile in about a minute one after the other; a fresh checkout's ``ci/demo.sh`` waits for it."""


class BuildExt(build_ext):
    """build_ext that turns a missing compiler into one clear message instead of a compiler
    traceback half way through the first extension, and compiles the kernels in parallel."""

    def finalize_options(self) -> None:
        super().finalize_options()
        if not self.parallel:  # `build_ext -j N` still decides
            self.parallel = JOBS

    def build_extensions(self) -> None:
        cmd = getattr(self.compiler, "compiler_so", None)
        if cmd and shutil.which(cmd[0]) is None:
            sys.exit(NO_COMPILER.format(detail=f"{cmd[0]!r} not found on PATH"))
        try:
            super().build_extensions()
        except FileNotFoundError as e:  # the compiler vanished between the check and the call
            sys.exit(NO_COMPILER.format(detail=str(e)))


def write_abi_includes() -> None:
    """Render every ABI family into ``kernels/_native/abi_<family>.pxi`` (rewritten only when it changes,
    so an unchanged ABI does not force a rebuild)."""
    spec = importlib.util.spec_from_file_location("_statemorph_abi", HERE / "src/statemorph/kernels/abi.py")
    assert spec is not None and spec.loader is not None
    abi = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(abi)
    for family in abi.FAMILIES:
        path = NATIVE / f"abi_{family}.pxi"
        text = abi.render_pxi(family)
        if not path.exists() or path.read_text() != text:
            path.write_text(text)


STUB_HEADER = '''"""Type declarations of the compiled kernel module ``statemorph.kernels.{stem}`` (built from
``kernels/_native/{stem}.pyx``), rendered by setup.py from its Python twin ``{stem}_py``: the twin's kernel
functions (its ``__all__``; tests prove the two tiers byte-equal, so the twin's annotations are the
declarations) and the compiled-only names the twin declares in ``COMPILED_ONLY_STUB``.
tests/packaging/test_kernel_stubs.py keeps this equal to what the compiled module exports."""
'''


def kernel_stub(twin: Path) -> str:
    """The ``.pyi`` of the compiled module whose Python twin is ``twin``, read without importing it
    (the package is not installed yet)."""
    stem = twin.stem[:-3]
    names: list[str] = []
    extra = ""
    for node in ast.parse(twin.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            if node.targets[0].id == "__all__":
                names = list(ast.literal_eval(node.value))
            elif node.targets[0].id == "COMPILED_ONLY_STUB":
                extra = ast.literal_eval(node.value)
    if not names:
        sys.exit(f"statemorph: {twin} has no __all__ naming its kernel functions")
    lines = [STUB_HEADER.format(stem=stem)]
    lines += [f"from .{stem}_py import {name} as {name}" for name in sorted(names)]
    return "\n".join(lines) + "\n" + ("\n" + extra.lstrip("\n") if extra else "")


def write_kernel_stubs() -> None:
    """Render ``src/statemorph/kernels/<stem>.pyi`` for every ``kernels/_native/<stem>.pyx`` (rewritten
    only when it changes)."""
    for pyx in sorted(NATIVE.glob("*.pyx")):
        path = HERE / "src/statemorph/kernels" / f"{pyx.stem}.pyi"
        text = kernel_stub(HERE / "src/statemorph/kernels" / f"{pyx.stem}_py.py")
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")


write_abi_includes()
write_kernel_stubs()
sanitize = os.environ.get("STATEMORPH_SANITIZE") == "1"

# The kernels' inner loops run a handful of iterations (fields of a row, words of a string): gcc's
# loop vectorizer and memset/memcpy idiom recognition wrap each in runtime alias checks, prologues
# or library calls that cost more than the loop (measured: ~5% of the migrate walk's instructions).
compile_args = ["-O0", "-g"] if debug else ["-O3", "-fno-tree-loop-distribute-patterns", "-fno-tree-vectorize"]
link_args: list[str] = []
if sanitize:
    compile_args += ["-fsanitize=address,undefined", "-fno-omit-frame-pointer", "-g"]
    link_args += ["-fsanitize=address,undefined"]
elif not debug and sys.platform.startswith("linux"):
    link_args += ["-s"]  # release: strip symbols (the six kernels: 9.1 MB unstripped, 1.5 MB stripped)

sources = sorted(NATIVE.glob("*.pyx"))
if not sources:
    sys.exit(f"statemorph: no Cython sources (*.pyx) under {NATIVE}; this source tree or sdist is "
             f"incomplete and would build a package without its compiled kernels")

extensions = [
    Extension(
        f"statemorph.kernels.{pyx.stem}",
        [str(pyx.relative_to(HERE))],
        include_dirs=[NATIVE_DIR],
        extra_compile_args=compile_args,
        extra_link_args=link_args,
        define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")],
    )
    for pyx in sources
]

setup(
    cmdclass={"build_ext": BuildExt},
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
        include_path=[NATIVE_DIR],
        nthreads=JOBS if JOBS > 1 else 0,
    ),
)
