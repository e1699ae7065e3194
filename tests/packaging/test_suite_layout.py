"""The test suite's own import rules: helpers live in helper modules, imported by their path below
``tests/`` (the ``pythonpath`` of pyproject.toml), so a test file never imports another test file
and nothing edits ``sys.path``. A helper imported from a test file runs that file's module code in
a second place, and a ``sys.path`` insert makes the same module importable under two names."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def _modules() -> list[tuple[str, ast.Module]]:
    return [(str(p.relative_to(TESTS)), ast.parse(p.read_text(encoding="utf-8")))
            for p in sorted(TESTS.rglob("*.py"))]


def _imported(tree: ast.Module) -> list[str]:
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            names.append(node.module or "")
    return names


def test_no_test_file_imports_another() -> None:
    offenders = [(path, name) for path, tree in _modules() for name in _imported(tree)
                 if any(part.startswith("test_") for part in name.split("."))]
    assert offenders == [], offenders


def test_nothing_edits_sys_path() -> None:
    offenders = []
    for path, tree in _modules():
        for node in ast.walk(tree):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr in ("insert", "append", "extend")
                    and ast.unparse(node.func.value) == "sys.path"):
                offenders.append((path, node.lineno))
    assert offenders == [], offenders
