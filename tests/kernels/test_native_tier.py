"""Tier selection: the compiled kernels must really be loaded (unless explicitly disabled), the env
switch is parsed strictly, and both tiers expose the same kernel names."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys

import pytest
from processes import child_env

from statemorph import kernels
from statemorph.kernels import tiers


def test_native_tier_loaded_unless_disabled() -> None:
    """Guard: a broken build must not silently fall back to the slow tier."""
    if os.environ.get("STATEMORPH_NATIVE") == "0":
        assert kernels.TIER == "python"
        return
    assert kernels.TIER == "native", f"compiled kernels did not load: {tiers._native_error}"
    for name in tiers.MODULES:
        mod = importlib.import_module(f"statemorph.kernels.{name}")
        assert mod.__statemorph_native__ is True
        assert not hasattr(importlib.import_module(f"statemorph.kernels.{name}_py"), "__statemorph_native__")


def test_both_tiers_expose_every_kernel() -> None:
    py = kernels.tier("python")
    for name, home in tiers.KERNEL_HOME.items():
        twin = importlib.import_module(f"statemorph.kernels.{home}_py")
        assert getattr(py, name) is getattr(twin, name)
    if kernels.native_available():
        nat = kernels.tier("native")
        for name, home in tiers.KERNEL_HOME.items():
            compiled = importlib.import_module(f"statemorph.kernels.{home}")
            assert getattr(nat, name) is getattr(compiled, name)
            assert getattr(nat, name) is not getattr(py, name)


@pytest.mark.parametrize("raw,expected", [(None, "auto"), ("auto", "auto"), (" 1 ", "1"), ("0", "0"), ("AUTO", "auto")])
def test_mode_parsing_accepts(raw: str | None, expected: str) -> None:
    assert tiers._parse_mode(raw) == expected


@pytest.mark.parametrize("raw", ["yes", "true", "2", "", "native"])
def test_mode_parsing_rejects(raw: str) -> None:
    with pytest.raises(ValueError, match="STATEMORPH_NATIVE"):
        tiers._parse_mode(raw)


def _import_with(value: str) -> subprocess.CompletedProcess[str]:
    env = child_env(STATEMORPH_NATIVE=value)
    code = "import statemorph.kernels as n; print(n.TIER)"
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
        kernels.tier("gpu")


_BLOCK = """
import importlib.abc, sys
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name == "statemorph.kernels.rowdata":
            raise ImportError("simulated missing build")
        return None
sys.meta_path.insert(0, Block())
import statemorph.kernels as n
print(n.TIER)
"""


@pytest.mark.parametrize("value,ok", [("1", False), ("auto", True)])
def test_missing_modules(value: str, ok: bool) -> None:
    env = child_env(STATEMORPH_NATIVE=value)
    r = subprocess.run([sys.executable, "-c", _BLOCK], env=env, capture_output=True, text=True, timeout=120)
    if ok:
        assert r.returncode == 0, r.stderr
        assert r.stdout.strip() == "python"
        # auto without the compiled tier is loud: one RuntimeWarning naming the cause
        assert r.stderr.count("RuntimeWarning") == 1, r.stderr
        assert "simulated missing build" in r.stderr
    else:
        assert r.returncode != 0
        assert "STATEMORPH_NATIVE=1 but the compiled kernels did not load" in r.stderr


@pytest.mark.skipif(not kernels.native_available(), reason="the compiled tier is not loaded")
@pytest.mark.parametrize("name", sorted(tiers.KERNEL_HOME))
def test_twin_has_the_compiled_signature(name: str) -> None:
    """Each compiled kernel and its Python twin (``kernels/<module>_py.py``) take the same parameters,
    in the same order, under the same names."""
    import inspect

    home = tiers.KERNEL_HOME[name]
    compiled = getattr(importlib.import_module(f"statemorph.kernels.{home}"), name)
    twin = getattr(importlib.import_module(f"statemorph.kernels.{home}_py"), name)
    assert list(inspect.signature(compiled).parameters) == list(inspect.signature(twin).parameters)
