"""The one place that picks the kernel tier.

``STATEMORPH_NATIVE`` (read once, at import):

- ``auto`` (default): the compiled kernels; when they do not import, the Python twins, with a
  ``RuntimeWarning`` (once) that names the cause: the twins are many times slower, and a silent
  fallback hides a broken build;
- ``1``: the compiled kernels, or ``ImportError`` saying what failed and how to build them;
- ``0``: the Python twins (``statemorph.kernels.<name>_py``), e.g. to debug a kernel.

Anything else is an error: a typo must not silently select the slow tier.

Exposes ``TIER`` (``"native"`` or ``"python"``), ``KERNELS`` (every kernel function bound to the
selected tier) and :func:`tier` to get either tier explicitly (the equivalence tests run both in
one process). Each compiled module carries ``__statemorph_native__ = True``.
"""

from __future__ import annotations

import importlib
import os
import pkgutil
import warnings
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any, Protocol, cast

MODULES = tuple(sorted(m.name[:-3] for m in pkgutil.iter_modules([str(Path(__file__).parent)])
                       if m.name.endswith("_py")))
"""The kernel modules: every Python twin ``statemorph.kernels.<module>_py`` beside its compiled
``statemorph.kernels.<module>`` (built from ``kernels/_native/<module>.pyx``), found, not listed: a new
kernel pair is picked up as it is added."""


def _kernel_home() -> dict[str, str]:
    home: dict[str, str] = {}
    for module in MODULES:
        for fn in importlib.import_module(f"statemorph.kernels.{module}_py").__all__:
            if fn in home:
                raise ImportError(f"kernel function {fn} is declared by both {home[fn]} and {module}")
            home[fn] = module
    return home


#: every kernel function and the module that holds it (each twin's ``__all__``):
#: ``statemorph.kernels.<module>`` compiled, ``statemorph.kernels.<module>_py`` its Python twin
KERNEL_HOME = _kernel_home()



class KernelTier(Protocol):
    """The kernel functions of one tier, as :func:`tier` hands them out: each compiled function and
    its Python twin have these names and signatures (the twins' annotations, which the ``.pyi``
    stubs re-export); ``name`` is ``"native"`` or ``"python"``."""

    name: str

    def fixed_encode(self, kind: int, values: Any, validity: Any, offset: int, start: int, stop: int, out_off: Any,
                     out_data: Any) -> None: ...
    def fixed_decode(self, kind: int, offsets: Any, data: Any, validity: Any, offset: int, wide: bool, start: int,
                     stop: int, out_values: Any, status: Any, stop_at_error: bool) -> int: ...
    def string_encode_sizes(self, offsets: Any, data: Any, validity: Any, offset: int, wide: bool, start: int,
                            stop: int, out_off: Any, stop_at_error: bool) -> int: ...
    def string_encode_fill(self, offsets: Any, data: Any, validity: Any, offset: int, wide: bool, start: int,
                           stop: int, out_off: Any, out_data: Any) -> None: ...
    def string_decode_sizes(self, offsets: Any, data: Any, validity: Any, offset: int, wide: bool, start: int,
                            stop: int, out_off: Any, status: Any, stop_at_error: bool) -> int: ...
    def string_decode_fill(self, offsets: Any, data: Any, validity: Any, offset: int, wide: bool, start: int,
                           stop: int, out_off: Any, status: Any, out_data: Any) -> None: ...
    def bytes_encode_fill(self, offsets: Any, data: Any, validity: Any, offset: int, wide: bool, start: int, stop: int,
                          out_off: Any, out_data: Any) -> None: ...
    def bytes_decode_sizes(self, offsets: Any, data: Any, validity: Any, offset: int, wide: bool, start: int,
                           stop: int, out_off: Any, status: Any, stop_at_error: bool) -> int: ...
    def bytes_decode_fill(self, offsets: Any, data: Any, validity: Any, offset: int, wide: bool, start: int, stop: int,
                          out_off: Any, status: Any, out_data: Any) -> None: ...
    def encode_run(self, prog: Any, cols: list[Any], start: int, stop: int, out_off: Any, out_data: Any, pos: int,
                   out_valid: Any, machine_code: int = 0) -> tuple[int, int, int, int]: ...
    def decode_run(self, prog: Any, offsets: Any, data: Any, validity: Any, offset: int, wide: bool, start: int,
                   stop: int, outs: list[Any], counts: Any, spos: Any, machine_code: int = 0) -> tuple[int, int]: ...
    def migrate_run(self, prog: Any, offsets: Any, data: Any, validity: Any, offset: int, wide: bool, start: int,
                    stop: int, out_off: Any, out_data: Any, pos: int,
                    machine_code: int = 0) -> tuple[int, int, int]: ...
    def core_row_sizes(self, prog: Any, offsets: Any, data: Any, validity: Any, offset: int, wide: bool, start: int,
                       stop: int, out_off: Any, stop_at_error: bool) -> int: ...
    def core_row_fill(self, prog: Any, offsets: Any, data: Any, validity: Any, offset: int, wide: bool, start: int,
                      stop: int, out_off: Any, out_data: Any) -> None: ...
    def pojo_migrate_run(self, prog: Any, offsets: Any, data: Any, validity: Any, offset: int, wide: bool, start: int,
                         stop: int, out_off: Any, out_data: Any, pos: int) -> tuple[int, int, int]: ...
    def corerow_encode(self, prog: Any, cols: list[Any], start: int, stop: int, out_off: Any, out_data: Any,
                       pos: int) -> tuple[int, int, int]: ...
    def corerow_decode(self, prog: Any, offsets: Any, data: Any, validity: Any, offset: int, wide: bool, start: int,
                       stop: int, outs: list[Any], spos: Any) -> tuple[int, int, int]: ...
    def avro_migrate_run(self, prog: Any, offsets: Any, data: Any, validity: Any, offset: int, wide: bool, start: int,
                         stop: int, out_off: Any, out_data: Any, pos: int) -> tuple[int, int, int]: ...
    def kg_scan(self, buf: Any, start: int, stop: int, n_states: int, key_pos: Any, key_len: Any, val_pos: Any,
                val_len: Any, run_state: Any, run_first: Any) -> tuple[int, int, int, int]: ...
    def copy_slices(self, src: Any, src_pos: Any, lengths: Any, dst: Any, dst_pos: Any, start: int,
                    stop: int) -> int: ...
    def kg_rebuild(self, src: Any, val_pos: Any, val_len: Any, first: Any, count: Any, piece_pos: Any, piece_pre: Any,
                   new_off: Any, new_data: Any, out: Any) -> int: ...
    def list_split(self, buf: Any, val_pos: Any, val_len: Any, rows: Any, ttl: int, fixed: int, elem_pos: Any,
                   elem_end: Any, elem_count: Any) -> tuple[int, int, int]: ...
    def sst_block(self, buf: Any, pos: int, size: int, checksum: int, out: Any) -> tuple[int, int]: ...
    def sst_decode(self, buf: Any, block_pos: Any, block_len: Any, start: int, stop: int, checksum: int,
                   scratch: Any, key_off: Any, key_data: Any, val_off: Any, val_data: Any,
                   n0: int) -> tuple[int, int, int]: ...
    def sst_merge(self, inputs: list[Any], pos: Any, end: Any, eof: Any, delimiter: int, group_len: int,
                  group: bytes, start_key: bytes, stop_key: bytes, slice_bytes: int, out_koff: Any, out_kdata: Any,
                  out_voff: Any, out_vdata: Any) -> tuple[int, int, int]: ...
    def sst_index(self, blk: Any, n: int, delta: bool, out_pos: Any, out_len: Any, key_off: Any,
                  key_data: Any) -> tuple[int, int]: ...
    def sst_lists(self, koff: Any, kdata: Any, voff: Any, vdata: Any, n: int) -> tuple[list[bytes], list[bytes]]: ...
    def snappy_compress(self, src: Any, n: int, out: Any) -> int: ...
    def sst_data(self, koff: Any, kdata: Any, voff: Any, vdata: Any, start: int, stop: int, final: bool, trailer: int,
                 block_size: int, restart_interval: int, deviation: int, compress: int, per_kb: int, checksum: int,
                 state: Any, scratch: Any, out: Any, index: Any, index_restarts: Any) -> tuple[int, int, int]: ...
    def sst_seal(self, raw: Any, n: int, restarts: Any, nrestarts: int, compress: int, per_kb: int, checksum: int,
                 out: Any) -> tuple[int, int]: ...
    def sst_reframe(self, buf: Any, block_pos: Any, block_len: Any, start: int, stop: int, checksum: int,
                    compress: int, per_kb: int, scratch: Any, out: Any) -> tuple[int, int, int, int]: ...


def _parse_mode(raw: str | None) -> str:
    value = (raw if raw is not None else "auto").strip().lower()
    if value not in ("auto", "1", "0"):
        raise ValueError(f"STATEMORPH_NATIVE must be 'auto', '1' or '0', got {raw!r}")
    return value


def _load(suffix: str) -> dict[str, ModuleType]:
    mods = {name: importlib.import_module(f"statemorph.kernels.{name}{suffix}") for name in MODULES}
    if not suffix:
        for mod in mods.values():
            if getattr(mod, "__statemorph_native__", False) is not True:
                raise ImportError(f"{mod.__name__} is not a statemorph compiled kernel module")
    return mods


def _namespace(name: str, mods: dict[str, ModuleType]) -> KernelTier:
    return cast(KernelTier, SimpleNamespace(name=name, **{fn: getattr(mods[home], fn)
                                                          for fn, home in KERNEL_HOME.items()}))


MODE = _parse_mode(os.environ.get("STATEMORPH_NATIVE"))
_TIERS: dict[str, KernelTier] = {"python": _namespace("python", _load("_py"))}
_native_error: ImportError | None = None
if MODE != "0":
    try:
        _TIERS["native"] = _namespace("native", _load(""))
    except ImportError as e:
        _native_error = e
        if MODE == "1":
            raise ImportError(
                f"STATEMORPH_NATIVE=1 but the compiled kernels did not load ({e}); build them with "
                f"'python setup.py build_ext --inplace' or install the package with pip"
            ) from e
        warnings.warn(
            f"statemorph: the compiled kernels did not load ({e}); bulk operations run on the much "
            f"slower Python twins. Build them with 'python setup.py build_ext --inplace', or set "
            f"STATEMORPH_NATIVE=0 to choose the Python tier on purpose.",
            RuntimeWarning, stacklevel=2,
        )

TIER = "native" if "native" in _TIERS else "python"
KERNELS = _TIERS[TIER]


def tier(name: str | None = None) -> KernelTier:
    """The kernel functions of tier ``name`` (``"native"`` / ``"python"``; default: the selected one).

    Asking for ``"native"`` when it did not load raises ImportError with the reason."""
    if name is None:
        return KERNELS
    if name == "native" and "native" not in _TIERS:
        raise ImportError(f"the native tier is not available: {_native_error}")
    if name not in ("native", "python"):
        raise ValueError(f"unknown tier {name!r}")
    return _TIERS[name]


def native_available() -> bool:
    return "native" in _TIERS


__all__ = ["KERNELS", "KERNEL_HOME", "KernelTier", "MODE", "MODULES", "TIER", "native_available", "tier"]
