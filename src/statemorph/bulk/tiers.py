"""The one place the bulk layer imports the kernels: the compiled modules (or their Python twins,
whichever tier :mod:`statemorph.kernels` chose), the kernel ABI, the plan compilers, and the
optional machine-code backend.

Why one module: when the kernels move or are renamed, only these imports change; every other
bulk module names the kernels through this one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .. import kernels
from ..kernels import abi, jit, plans, primitives_py, rowdata_py
from ..kernels.tiers import KernelTier

MACHINE_CODE_MIN = 8192
"""Entries in a chunk before a RowData plan is compiled to machine code (compiling costs ~0.1 s,
once per plan and process)."""


def current() -> KernelTier:
    """The kernel tier in use (compiled or Python twins), read at call time: tests switch it."""
    return kernels.KERNELS


def machine_code(compile_plan: Callable[[np.ndarray], Any], matrix: np.ndarray, k: KernelTier,
                 n: int) -> tuple[Any, tuple[int, ...]]:
    """The machine code of a RowData program (``compile_plan`` from :mod:`statemorph.kernels.jit`)
    and the kernel's extra argument for it (its address): none on the Python tier, or for chunks
    under :data:`MACHINE_CODE_MIN` entries. The caller holds the code object for as long as the
    kernels run (it owns the code's memory)."""
    code = compile_plan(matrix) if k.name == "native" and n >= MACHINE_CODE_MIN else None
    return code, ((code.address,) if code is not None else ())


__all__ = ["MACHINE_CODE_MIN", "KernelTier", "abi", "current", "jit", "machine_code", "plans", "primitives_py",
           "rowdata_py"]
