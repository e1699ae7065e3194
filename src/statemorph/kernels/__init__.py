"""Bulk kernels over Arrow buffers: each compiled module (``kernels/_native/<name>.pyx``, built as
``statemorph.kernels.<name>``) beside its Python twin ``<name>_py`` with the same names.

- :mod:`.abi`: status codes, op kinds and program columns, declared once for both tiers;
- :mod:`.plans`: plan compilers (a type or a schema pair becomes a flat int64 program);
- :mod:`.tiers`: which tier runs (``STATEMORPH_NATIVE``), chosen once and loudly;
- :mod:`.jit`: optional LLVM machine code for RowData programs (a backend of the same plans);
- :mod:`.views`: the twins' shared reading of Arrow buffers.

Callers run the selected tier's functions through ``kernels.KERNELS`` (read at call time, so tests
can swap it) or a tier explicitly through ``kernels.tier("python" | "native")``.
"""

from __future__ import annotations

from .tiers import KERNELS, MODE, TIER, native_available, tier

__all__ = ["KERNELS", "MODE", "TIER", "native_available", "tier"]
