"""The artifacts a user installs: the sdist carries the Cython sources, installing it compiles the
kernels (the compiled tier is the one that runs, in a fresh virtualenv), the release build strips
its .so files, and a build without Cython or without a C compiler stops with a clear message
instead of producing a silently slow pure-Python package.

The end-to-end test is ``slow`` (it compiles the kernels, about a minute on 2 cores) but runs in CI
like every other test. It needs no network beyond what pip already has: the wheels the fresh
environment needs (build requirements and runtime dependencies) are collected once with the
current environment's pip (its configured indexes and cache), then installed with
``--no-index --find-links``.
"""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
import sys
import tarfile
from importlib.metadata import version
from pathlib import Path

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[2]
KERNEL_SOURCE_SUFFIXES = (".pyx", ".pxd", ".pxi")


def _clean_env(**extra: str) -> dict[str, str]:
    """The environment without this checkout on the path (the fresh venv must use what it installed)."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    env.update(extra)
    return env


def _run(cmd: list[str], **kw) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(cmd, capture_output=True, text=True, check=False, **kw)
    assert done.returncode == 0, f"{cmd} failed ({done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


NATIVE = ROOT / "src" / "statemorph" / "kernels" / "_native"
"""The Cython sources of the compiled tier."""


def _kernel_sources() -> set[str]:
    """Every Cython source and header of the checkout, relative to the root."""
    found = set()
    for p in (ROOT / "src").rglob("*"):
        if p.suffix in KERNEL_SOURCE_SUFFIXES and p.is_file():
            found.add(p.relative_to(ROOT).as_posix())
    return found


def elf_section_names(path: Path) -> set[str]:
    """The section names of a 64-bit little-endian ELF file (enough to tell stripped from not)."""
    data = path.read_bytes()
    assert data[:4] == b"\x7fELF" and data[4] == 2 and data[5] == 1, f"{path} is not a 64-bit LE ELF file"
    shoff = struct.unpack_from("<Q", data, 0x28)[0]
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    str_off = struct.unpack_from("<Q", data, shoff + shstrndx * shentsize + 0x18)[0]
    names = set()
    for i in range(shnum):
        name_off = struct.unpack_from("<I", data, shoff + i * shentsize)[0]
        end = data.index(b"\x00", str_off + name_off)
        names.add(data[str_off + name_off:end].decode("ascii"))
    return names


def _required_distributions() -> list[str]:
    """What building and running the sdist needs, read from pyproject.toml (markers applied), so a
    new dependency is picked up without touching this test."""
    from packaging.requirements import Requirement

    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    reqs = [Requirement(r) for r in project["build-system"]["requires"] + project["project"]["dependencies"]]
    return [r.name for r in reqs if r.marker is None or r.marker.evaluate()]


@pytest.fixture(scope="module")
def sdist(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("sdist")
    _run([sys.executable, "-m", "build", "--sdist", "--no-isolation", "--outdir", str(out), str(ROOT)],
         env=_clean_env())
    (path,) = out.glob("statemorph-*.tar.gz")
    return path


@pytest.mark.slow
def test_sdist_carries_every_kernel_source_and_no_generated_c(sdist):
    with tarfile.open(sdist) as tar:
        names = tar.getnames()
    top = names[0].split("/")[0]
    members = {n.split("/", 1)[1] for n in names if "/" in n}
    expected = _kernel_sources()
    assert expected, "the checkout has no Cython sources"
    assert expected <= members, f"missing from the sdist: {sorted(expected - members)}"
    stubs = {f"src/statemorph/kernels/{p.stem}.pyi" for p in NATIVE.glob("*.pyx")}
    assert stubs <= members, f"kernel type declarations missing from the sdist: {sorted(stubs - members)}"
    for needed in ("setup.py", "pyproject.toml", "LICENSE", "README.md", "src/statemorph/py.typed"):
        assert needed in members, f"{needed} missing from {top}"
    assert not [m for m in members if m.endswith((".c", ".so"))], "generated or compiled files in the sdist"


@pytest.mark.slow
def test_sdist_installs_the_compiled_tier_in_a_fresh_venv(sdist, tmp_path):
    # wheels for the isolated build (build-system.requires) and the runtime (project.dependencies),
    # pinned to what this environment runs, so pip's cache or local index answers
    wheelhouse = tmp_path / "wheelhouse"
    pins = [f"{name}=={version(name)}" for name in _required_distributions()]
    _run([sys.executable, "-m", "pip", "download", "--only-binary", ":all:", "-q", "-d", str(wheelhouse), *pins],
         env=_clean_env())

    venv = tmp_path / "fresh"
    _run([sys.executable, "-m", "venv", str(venv)], env=_clean_env())
    py = venv / "bin" / "python"
    _run([str(py), "-m", "pip", "install", "-q", "--no-index", "--find-links", str(wheelhouse), str(sdist)],
         env=_clean_env(), cwd=tmp_path)

    kernels = sorted(p.stem for p in NATIVE.glob("*.pyx"))  # one compiled module per .pyx
    probe = (
        "import importlib, sys, statemorph, statemorph.kernels as k;"
        "files = [importlib.import_module(f'statemorph.kernels.{m}').__file__ for m in sys.argv[1:]];"
        "print(k.TIER); print(statemorph.__file__); print(*files, sep='\\n')"
    )
    done = _run([str(py), "-c", probe, *kernels], env=_clean_env(STATEMORPH_NATIVE="1"), cwd=tmp_path)
    tier, package, *so_files = done.stdout.split()
    assert tier == "native"
    assert Path(package).is_relative_to(venv), f"imported {package}, not the installed package"
    assert len(so_files) == len(kernels) > 0
    for so in map(Path, so_files):
        assert so.is_relative_to(venv) and so.suffix == ".so", so
        assert so.with_name(so.name.split(".")[0] + ".pyi").is_file(), f"no type declarations beside {so.name}"
        if sys.platform.startswith("linux"):
            sections = elf_section_names(so)
            assert ".symtab" not in sections and not any(s.startswith(".debug") for s in sections), \
                f"{so.name} is not stripped: {sorted(sections)}"

    version_out = _run([str(venv / "bin" / "statemorph"), "--version"], env=_clean_env(), cwd=tmp_path)
    assert version_out.stdout.startswith("statemorph ")


def _setup_py(tmp_path: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """``setup.py build_ext`` of this checkout, building into ``tmp_path`` (never into the tree)."""
    return subprocess.run([sys.executable, str(ROOT / "setup.py"), "-q", "build_ext", "--build-temp",
                           str(tmp_path / "tmp"), "--build-lib", str(tmp_path / "lib")],
                          cwd=ROOT, env=env, capture_output=True, text=True, check=False)


def test_build_without_cython_says_what_to_install(tmp_path):
    shadow = tmp_path / "shadow" / "Cython"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ImportError('No module named Cython (simulated)')\n")
    done = _setup_py(tmp_path, _clean_env(PYTHONPATH=str(shadow.parent)))
    assert done.returncode != 0
    assert "Cython 3 is required" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "lib").exists()


def test_build_without_a_compiler_says_so(tmp_path):
    done = _setup_py(tmp_path, _clean_env(CC=str(tmp_path / "no-such-cc"), LDSHARED=str(tmp_path / "no-such-cc")))
    assert done.returncode != 0
    assert "no working C compiler" in done.stderr and "no-such-cc" in done.stderr
    assert "Traceback" not in done.stderr
    assert not list((tmp_path / "lib").rglob("*.so"))


@pytest.mark.skipif(shutil.which("cc") is None and shutil.which("gcc") is None, reason="needs a C compiler")
def test_elf_section_reader_sees_symbols_of_an_unstripped_object(tmp_path):
    src = tmp_path / "x.c"
    src.write_text("int f(int x) { return x + 1; }\n")
    cc = shutil.which("cc") or shutil.which("gcc")
    _run([cc, "-shared", "-fPIC", "-g", "-o", str(tmp_path / "x.so"), str(src)])
    _run([cc, "-shared", "-fPIC", "-g", "-s", "-o", str(tmp_path / "y.so"), str(src)])
    assert ".symtab" in elf_section_names(tmp_path / "x.so")
    assert ".symtab" not in elf_section_names(tmp_path / "y.so")
