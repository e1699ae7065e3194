"""Bulk kernels over Arrow buffers: each compiled module (``_native/<name>.pyx``, built as
``statemorph.kernels.<name>``) beside its Python twin ``<name>_py`` with the same names.

- :mod:`.abi`: status codes, op kinds and program columns, declared once for both tiers;
- :mod:`.plans`: plan compilers (a type or a schema pair becomes a flat int64 program);
- :mod:`.tiers`: which tier runs (``STATEMORPH_NATIVE``), chosen once and loudly;
- :mod:`.jit`: optional LLVM machine code for RowData programs (a backend of the same plans).

Callers take kernel functions from here (``kernels.migrate_run`` ...) or a tier explicitly
(``kernels.tier("python")``).
"""

from __future__ import annotations

from typing import Any

from .tiers import KERNELS, MODE, TIER, native_available, tier


def __getattr__(name: str) -> Any:
    from . import tiers

    return tiers.__getattr__(name)


__all__ = ["KERNELS", "MODE", "TIER", "native_available", "tier"]
