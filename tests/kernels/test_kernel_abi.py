"""The kernel ABI is declared once (``statemorph.kernels.abi``): the ``.pxi`` files the compiled
kernels were built from match it, and no kernel source declares one of its names by hand."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from statemorph.kernels import abi

NATIVE = Path(__file__).resolve().parents[2] / "src" / "statemorph" / "kernels" / "_native"
SOURCES = sorted([*NATIVE.glob("*.pyx"), *NATIVE.glob("*.pxd"),
                  *(p for p in NATIVE.glob("*.pxi") if not p.name.startswith("abi_"))])


@pytest.mark.parametrize("family", sorted(abi.FAMILIES))
def test_generated_include_matches_abi(family: str) -> None:
    path = NATIVE / f"abi_{family}.pxi"
    if not path.exists():
        pytest.skip("the compiled tier is not built here (setup.py writes the includes)")
    assert path.read_text() == abi.render_pxi(family)


def test_every_kernel_source_takes_the_abi_from_the_includes() -> None:
    declared = {name for names in abi.FAMILIES.values() for name in names}
    assert SOURCES
    for src in SOURCES:
        for line_no, line in enumerate(src.read_text().splitlines(), 1):
            m = re.match(r"\s+([A-Z][A-Z0-9_]*)\s*=\s*-?\d+\b", line)
            if m and m.group(1) in declared:
                pytest.fail(f"{src.name}:{line_no} declares {m.group(1)} by hand (it comes from kernels/abi.py)")
    includes = {src.name: re.findall(r'^include "abi_(\w+)\.pxi"', src.read_text(), re.M) for src in SOURCES}
    assert includes["cursor.pxd"] == ["common"]
    for family in set(abi.FAMILIES) - {"common"}:
        assert any(family in fams for fams in includes.values()), f"no kernel includes abi_{family}.pxi"


def test_values_are_unique_within_each_family() -> None:
    """Two names of one family with one value would make a kernel's switch ambiguous (the program
    columns are the exception: COL_LIMIT and COL_WIDTH are the same column read by different kernels)."""
    for family, names in abi.FAMILIES.items():
        groups: dict[str, dict[int, str]] = {}
        for name in names:
            prefix = name.split("_", 1)[0] if "_" in name else name
            if prefix == "COL":
                continue
            seen = groups.setdefault(prefix, {})
            value = getattr(abi, name)
            assert value not in seen, f"{family}: {name} and {seen.get(value)} share {value}"
            seen[value] = name


def test_hand_back_is_not_an_error_code() -> None:
    errors = {getattr(abi, n) for n in dir(abi) if n.startswith("ERR_") and n != "ERR_OK"}
    assert abi.HAND_BACK not in errors
    assert abi.decode_err(abi.encode_err(abi.HAND_BACK, 3)) == (abi.HAND_BACK, 3)
