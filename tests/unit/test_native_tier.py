"""Tier selection: the compiled kernels must really be loaded (unless explicitly disabled), the env
switch is parsed strictly, and both tiers expose the same kernel names."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from statemorph import _native
from statemorph.serializers import _batch

SRC = str(Path(__file__).resolve().parents[2] / "src")


def test_native_tier_loaded_unless_disabled() -> None:
    """Guard: a broken build must not silently fall back to the slow tier."""
    if os.environ.get("STATEMORPH_NATIVE") == "0":
        assert _native.TIER == "python"
        return
    assert _native.TIER == "native", f"compiled kernels did not load: {_native._native_error}"
    from statemorph._native import avro, corerow, primitives, remap, rowdata, strings  # type: ignore[attr-defined]

    for mod in (primitives, strings, rowdata, remap, corerow, avro):
        assert mod.__statemorph_native__ is True


def test_both_tiers_expose_every_kernel() -> None:
    py = _native.tier("python")
    for name in _batch.KERNELS:
        assert getattr(py, name) is getattr(_batch, name)
    if _native.native_available():
        nat = _native.tier("native")
        for name in _batch.KERNELS:
            assert callable(getattr(nat, name))
            assert getattr(nat, name) is not getattr(_batch, name)


@pytest.mark.parametrize("raw,expected", [(None, "auto"), ("auto", "auto"), (" 1 ", "1"), ("0", "0"), ("AUTO", "auto")])
def test_mode_parsing_accepts(raw: str | None, expected: str) -> None:
    assert _native._parse_mode(raw) == expected


@pytest.mark.parametrize("raw", ["yes", "true", "2", "", "native"])
def test_mode_parsing_rejects(raw: str) -> None:
    with pytest.raises(ValueError, match="STATEMORPH_NATIVE"):
        _native._parse_mode(raw)


def _import_with(value: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, STATEMORPH_NATIVE=value, PYTHONPATH=SRC)
    code = "import statemorph._native as n; print(n.TIER)"
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)


def test_env_zero_selects_python_tier() -> None:
    r = _import_with("0")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "python"


def test_env_invalid_value_fails_import() -> None:
    r = _import_with("maybe")
    assert r.returncode != 0
    assert "STATEMORPH_NATIVE must be" in r.stderr


def test_unknown_tier_name() -> None:
    with pytest.raises(ValueError):
        _native.tier("gpu")


_BLOCK = """
import importlib.abc, sys
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name == "statemorph._native.rowdata":
            raise ImportError("simulated missing build")
        return None
sys.meta_path.insert(0, Block())
import statemorph._native as n
print(n.TIER)
"""


@pytest.mark.parametrize("value,ok", [("1", False), ("auto", True)])
def test_missing_modules(value: str, ok: bool) -> None:
    env = dict(os.environ, STATEMORPH_NATIVE=value, PYTHONPATH=SRC)
    r = subprocess.run([sys.executable, "-c", _BLOCK], env=env, capture_output=True, text=True, timeout=120)
    if ok:
        assert r.returncode == 0, r.stderr
        assert r.stdout.strip() == "python"
    else:
        assert r.returncode != 0
        assert "STATEMORPH_NATIVE=1 but the compiled kernels did not load" in r.stderr
