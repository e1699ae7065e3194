"""statemorph.typeutils: the serializer contract, snapshots, their registry and bytes in one
package whose modules import one way (no circle, no import inside a function to dodge one), and
the names 0.1.0 users import still resolve."""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

import statemorph
from statemorph import typeutils

PACKAGE = Path(typeutils.__file__).parent
# each module may import only the ones before it (and errors / io below the package)
ORDER = ["serializer", "singleton", "registry", "versioned", "simple_snapshot", "composite_snapshot"]
BELOW = {"errors", "io", "types"}  # a serializer declares the logical type of its values


def _imports(module: str) -> list[tuple[int, str, bool]]:
    """(line, the statemorph module imported, whether the import sits inside a function)."""
    tree = ast.parse((PACKAGE / f"{module}.py").read_text(encoding="utf-8"))
    inside = {id(n) for f in ast.walk(tree) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
              for n in ast.walk(f)}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level:
            target = node.module if node.level == 1 else f"..{node.module}"
            found.append((node.lineno, target or "", id(node) in inside))
    return found


def test_every_module_is_in_the_order() -> None:
    assert sorted(p.stem for p in PACKAGE.glob("*.py") if p.stem != "__init__") == sorted(ORDER)


def test_modules_import_one_way_and_at_the_top() -> None:
    offenders = []
    for i, module in enumerate(ORDER):
        allowed = set(ORDER[:i]) | {f"..{m}" for m in BELOW}
        for line, target, in_function in _imports(module):
            if target not in allowed or in_function:
                offenders.append(f"{module}.py:{line} imports {target}{' inside a function' if in_function else ''}")
    assert offenders == []


def test_old_module_paths_are_gone() -> None:
    for old in ("statemorph.compat", "statemorph.snapshot", "statemorph.serializers.base"):
        assert importlib.util.find_spec(old) is None, old


def test_0_1_0_names_still_resolve() -> None:
    from statemorph import compat, serializers, snapshot

    assert snapshot is typeutils and compat is typeutils
    assert {"compat", "snapshot", "typeutils"} <= set(statemorph.__all__)
    for name in statemorph.__all__:
        assert getattr(statemorph, name) is not None, name
    assert serializers.TypeSerializer is typeutils.TypeSerializer
    assert statemorph.SchemaCompatibility is typeutils.SchemaCompatibility
    for name in typeutils.__all__:
        assert getattr(typeutils, name) is not None, name
