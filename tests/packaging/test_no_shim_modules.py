"""No module of the package only hands on names that live elsewhere (a "moved to" shim): every
name has one home, and the package imports it from there. A package's ``__init__`` is its face
and may re-export; any other module must define something."""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

import statemorph

SRC = Path(statemorph.__file__).parent
REMOVED = ["statemorph.spark", "statemorph.savepoint.format", "statemorph.savepoint.reader",
           "statemorph.savepoint.writer", "statemorph.state.keygroups", "statemorph.state.namespace"]


def _only_re_exports(tree: ast.Module) -> bool:
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            continue
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):  # the docstring
            continue
        if isinstance(node, ast.Assign) and [ast.unparse(t) for t in node.targets] == ["__all__"]:
            continue
        return False
    return True


def test_no_module_only_re_exports() -> None:
    shims = [str(p.relative_to(SRC)) for p in sorted(SRC.rglob("*.py"))
             if p.name != "__init__.py" and _only_re_exports(ast.parse(p.read_text(encoding="utf-8")))]
    assert shims == []


def test_removed_shim_paths_stay_removed() -> None:
    assert [name for name in REMOVED if importlib.util.find_spec(name) is not None] == []
