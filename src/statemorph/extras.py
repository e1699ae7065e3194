"""Optional dependencies and the extras that install them: the ONE place that turns a missing
optional module into a one-line message naming what to install.

statemorph's core needs numpy and pyarrow only; Spark, RocksDB, Avro and the LLVM JIT come with
extras (``pip install "statemorph[spark]"``). A feature that needs one calls :func:`require` at
the point of use (or up front, before any work, as the CLI does), so a user without it reads one
line, never a ``ModuleNotFoundError`` traceback from deep inside the library. The module names
here are constants of the code, never read from data.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from .errors import MissingDependencyError

EXTRAS: dict[str, str] = {
    "pyspark": "spark",
    "rocksdict": "rocksdb",
    "fastavro": "avro",
    "llvmlite": "jit",
}
"""Top-level module → the extra of pyproject.toml that installs it."""


def install_hint(extra: str) -> str:
    return f'pip install "statemorph[{extra}]"'


def require(module: str, feature: str) -> ModuleType:
    """Import the optional ``module`` (one of :data:`EXTRAS`) or raise
    :class:`~statemorph.errors.MissingDependencyError` saying which ``feature`` needs it and
    which extra to install."""
    extra = EXTRAS[module]
    try:
        return importlib.import_module(module)
    except ImportError as e:
        # the module itself is missing, or it is there but one of its own dependencies is not
        # (pyspark without py4j): either way the extra installs what is needed
        problem = "is not installed" if e.name in (None, module) else f"does not import ({e})"
        raise MissingDependencyError(f"{feature} needs {module}, which {problem}: {install_hint(extra)}",
                                     module=module, extra=extra) from None


__all__ = ["EXTRAS", "install_hint", "require"]
