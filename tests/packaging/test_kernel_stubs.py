"""The compiled kernel modules are typed for users' type-checkers: each ``kernels/_native/<name>.pyx`` has a
``statemorph/kernels/<name>.pyi`` shipped beside it, declaring exactly what the compiled module
exports (the twin's annotated functions re-exported, plus the compiled-only names), and mypy
--strict sees real signatures through it, not ``Any``."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
from processes import mypy_env

from statemorph import kernels

ROOT = Path(__file__).resolve().parents[2]
COMPILED = sorted(p.stem for p in (ROOT / "src" / "statemorph" / "kernels" / "_native").glob("*.pyx"))
KERNELS_DIR = Path(kernels.__file__).parent


def declared(stub: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.parse(stub.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.ImportFrom) and node.module and node.module.endswith("_py"):
            names |= {a.asname for a in node.names if a.asname == a.name}
        elif isinstance(node, ast.FunctionDef):
            names.add(node.name)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return names


def exported(module: ModuleType) -> set[str]:
    return {n for n, v in vars(module).items() if not n.startswith("_") and not isinstance(v, ModuleType)}


def test_there_are_compiled_modules() -> None:
    assert {"rowdata", "strings", "primitives"} <= set(COMPILED)


@pytest.mark.parametrize("name", COMPILED)
def test_stub_declares_what_the_module_exports(name: str) -> None:
    stub = KERNELS_DIR / f"{name}.pyi"
    assert stub.is_file(), f"no type declarations for the compiled module {name} in {KERNELS_DIR}"
    names = declared(stub)
    twin = importlib.import_module(f"statemorph.kernels.{name}_py")
    assert names, stub
    reexported = {n for n in names if hasattr(twin, n)}
    assert all(callable(getattr(twin, n)) for n in reexported)
    if not kernels.native_available():
        pytest.skip("compiled tier not built: the declarations are checked against the twin only")
    compiled = importlib.import_module(f"statemorph.kernels.{name}")
    assert names == exported(compiled), f"{stub.name} is out of step with the compiled module"


def test_mypy_strict_sees_kernel_signatures(tmp_path: Path) -> None:
    pytest.importorskip("mypy")
    user = tmp_path / "user.py"
    user.write_text("from statemorph.kernels import rowdata, strings\n"
                    "reveal_type(rowdata.migrate_run)\n"
                    "reveal_type(strings.string_encode_sizes)\n"
                    "reveal_type(rowdata.node_layout())\n", encoding="utf-8")
    proc = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--no-incremental", "--follow-imports=silent",
                           "--cache-dir", str(tmp_path / "cache"), str(user)], cwd=tmp_path,
                          env=mypy_env(), capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    revealed = [ln.split("Revealed type is ", 1)[1] for ln in proc.stdout.splitlines() if "Revealed type" in ln]
    assert len(revealed) == 3 and not any(r == '"Any"' for r in revealed), proc.stdout
    assert revealed[0].startswith('"def (prog: Any, offsets: Any') and revealed[0].endswith('-> tuple[int, int, int]"')
    assert revealed[2] == '"dict[str, int]"'
