"""Type declarations of the compiled kernel module ``statemorph.kernels.rowdata`` (built from
``_native/rowdata.pyx``). It has the names and signatures of its Python twin ``rowdata_py`` (tests prove
the two byte-equal), so the twin's annotations are the declarations; tests/packaging/test_kernel_stubs.py
keeps this list equal to what the compiled module exports."""

from typing import Any

from .rowdata_py import decode_run as decode_run
from .rowdata_py import encode_run as encode_run
from .rowdata_py import migrate_run as migrate_run

# compiled only: the hooks statemorph.kernels.jit compiles plan machine code against
OP_CODES: dict[str, int]
def lowered_ops(prog: Any) -> list[dict[str, Any]] | None: ...
def var_field_address() -> int: ...
def utf8_valid_address() -> int: ...
def node_layout() -> dict[str, int]: ...
