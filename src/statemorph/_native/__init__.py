"""The one place that picks the kernel tier.

``STATEMORPH_NATIVE`` (read once, at import):

- ``auto`` (default): the compiled kernels when they import, else the Python reference tier;
- ``1``: the compiled kernels, or ``ImportError`` saying which module is missing and how to build;
- ``0``: the Python reference tier (``statemorph.serializers._batch``), e.g. to debug a kernel.

Anything else is an error: a typo must not silently select the slow tier.

Exposes ``TIER`` (``"native"`` or ``"python"``), every kernel function under its own name (bound
to the selected tier), and :func:`tier` to get either tier explicitly (the equivalence tests run
both in one process). Each compiled module carries ``__statemorph_native__ = True``.
"""

from __future__ import annotations

import os
from types import ModuleType, SimpleNamespace
from typing import Any

from ..serializers import _batch

_KERNEL_HOME = {
    "fixed_encode": "primitives", "fixed_decode": "primitives",
    "string_encode_sizes": "strings", "string_encode_fill": "strings",
    "string_decode_sizes": "strings", "string_decode_fill": "strings",
    "bytes_encode_fill": "strings", "bytes_decode_sizes": "strings", "bytes_decode_fill": "strings",
    "encode_run": "rowdata", "decode_run": "rowdata", "migrate_run": "rowdata",
    "core_row_sizes": "remap", "core_row_fill": "remap", "pojo_migrate_run": "remap",
    "corerow_encode": "corerow", "corerow_decode": "corerow",
    "avro_migrate_run": "avro",
}


def _parse_mode(raw: str | None) -> str:
    value = (raw if raw is not None else "auto").strip().lower()
    if value not in ("auto", "1", "0"):
        raise ValueError(f"STATEMORPH_NATIVE must be 'auto', '1' or '0', got {raw!r}")
    return value


def _load_native() -> dict[str, ModuleType]:
    from . import avro, corerow, primitives, remap, rowdata, strings  # type: ignore[attr-defined]

    mods: dict[str, ModuleType] = {"primitives": primitives, "strings": strings, "rowdata": rowdata,
                                   "remap": remap, "corerow": corerow, "avro": avro}
    for mod in mods.values():
        if getattr(mod, "__statemorph_native__", False) is not True:
            raise ImportError(f"{mod.__name__} is not a statemorph compiled kernel module")
    return mods


def _namespace(name: str, mods: dict[str, ModuleType] | None) -> SimpleNamespace:
    fns: dict[str, Any] = {}
    for fn in _batch.KERNELS:
        fns[fn] = getattr(mods[_KERNEL_HOME[fn]], fn) if mods is not None else getattr(_batch, fn)
    return SimpleNamespace(name=name, **fns)


MODE = _parse_mode(os.environ.get("STATEMORPH_NATIVE"))
_native_mods: dict[str, ModuleType] | None = None
_native_error: ImportError | None = None
if MODE != "0":
    try:
        _native_mods = _load_native()
    except ImportError as e:
        _native_error = e
        if MODE == "1":
            raise ImportError(
                f"STATEMORPH_NATIVE=1 but the compiled kernels did not load ({e}); build them with "
                f"'python setup.py build_ext --inplace' or install the package with pip"
            ) from e

TIER = "native" if _native_mods is not None else "python"
_TIERS = {"python": _namespace("python", None)}
if _native_mods is not None:
    _TIERS["native"] = _namespace("native", _native_mods)
KERNELS = _TIERS[TIER]


def tier(name: str | None = None) -> SimpleNamespace:
    """The kernel functions of tier ``name`` (``"native"`` / ``"python"``; default: the selected one).

    Asking for ``"native"`` when it did not load raises ImportError with the reason."""
    if name is None:
        return KERNELS
    if name == "native" and "native" not in _TIERS:
        raise ImportError(f"the native tier is not available: {_native_error}")
    if name not in ("native", "python"):
        raise ValueError(f"unknown tier {name!r}")
    return _TIERS[name]


def native_available() -> bool:
    return "native" in _TIERS


def __getattr__(name: str) -> Any:
    if name in _KERNEL_HOME:
        return getattr(KERNELS, name)
    raise AttributeError(name)


__all__ = ["KERNELS", "MODE", "TIER", "native_available", "tier"]
