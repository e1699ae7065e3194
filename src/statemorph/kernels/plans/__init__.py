"""Plan compilers, in one place: a type, or a pair of schemas, becomes the flat int64 program the
kernels execute (compiled tier, Python twin and, for RowData, the LLVM backend alike).

Why: the compatibility decisions and by-name field mapping happen once, in Python, per state; the
kernels then run the same program over every entry without a Python object. What a program cannot
express raises :class:`NotByteRemappable` and the column keeps the per-value path.
"""

from __future__ import annotations

from .avro import avro_growth, compile_avro_program
from .composite import compile_core_row_program, compile_pojo_program, pojo_growth
from .corerow import STRING_KINDS, compile_core_row_codec
from .rowdata import (
    ARROW_KINDS,
    ARROW_WIDTH,
    NotByteRemappable,
    RowProgram,
    compile_migration_program,
    compile_row_program,
    slot_kind,
)

__all__ = [
    "ARROW_KINDS",
    "ARROW_WIDTH",
    "STRING_KINDS",
    "NotByteRemappable",
    "RowProgram",
    "avro_growth",
    "compile_avro_program",
    "compile_core_row_codec",
    "compile_core_row_program",
    "compile_migration_program",
    "compile_pojo_program",
    "compile_row_program",
    "pojo_growth",
    "slot_kind",
]
