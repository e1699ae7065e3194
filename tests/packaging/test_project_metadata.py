"""pyproject.toml says what the artifacts promise, consistently: the license file and expression,
the Python versions (requires-python, classifiers, the wheels cibuildwheel builds), tomli where
tomllib is missing, and the wheel test that proves the compiled tier."""

from __future__ import annotations

import re
import sys
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[2]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def test_license_is_apache_2_full_text():
    text = (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert "Apache License" in text and "Version 2.0, January 2004" in text
    assert "END OF TERMS AND CONDITIONS" in text
    assert PROJECT["project"]["license"] == "Apache-2.0" and "LICENSE" in PROJECT["project"]["license-files"]


def test_python_versions_agree():
    project = PROJECT["project"]
    assert project["requires-python"] == ">=3.10"
    classified = sorted(c.rsplit(" ", 1)[1] for c in project["classifiers"]
                        if re.fullmatch(r"Programming Language :: Python :: 3\.\d+", c))
    assert classified == ["3.10", "3.11", "3.12", "3.13"]
    built = PROJECT["tool"]["cibuildwheel"]["build"].split()
    assert built == [f"cp3{v.split('.')[1]}-*" for v in classified]
    assert PROJECT["tool"]["cibuildwheel"]["linux"]["archs"] == ["x86_64", "aarch64"]


def test_tomli_is_a_dependency_where_tomllib_is_missing():
    assert 'tomli>=2.0; python_version < "3.11"' in PROJECT["project"]["dependencies"]
    source = (ROOT / "src" / "statemorph" / "schema_file.py").read_text(encoding="utf-8")
    assert "import tomli as tomllib" in source


def test_wheel_test_command_checks_the_compiled_tier():
    cmd = PROJECT["tool"]["cibuildwheel"]["test-command"]
    assert "TIER == 'native'" in cmd


def test_urls_and_build_in_the_test_extra():
    assert {"Homepage", "Documentation", "Repository", "Issues"} <= set(PROJECT["project"]["urls"])
    assert any(r.startswith("build") for r in PROJECT["project"]["optional-dependencies"]["test"])
