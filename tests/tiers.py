"""The kernel tiers a test runs on, and a way to run a body on each of them in one process (a
hypothesis body cannot take a function-scoped fixture)."""

from __future__ import annotations

from typing import Any

from statemorph import kernels

TIERS = ["python"] + (["native"] if kernels.native_available() else [])


def on_tiers(fn: Any) -> dict[str, Any]:
    """``fn()`` once per tier, the selected kernels restored afterwards: tier name → result."""
    saved = kernels.KERNELS
    out: dict[str, Any] = {}
    try:
        for name in TIERS:
            kernels.KERNELS = kernels.tier(name)
            out[name] = fn()
    finally:
        kernels.KERNELS = saved
    return out
