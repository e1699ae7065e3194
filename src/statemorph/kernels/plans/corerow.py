"""Plan compiler: flink-core Row encode / decode programs (``RowSerializer`` <-> Arrow struct columns).

The programs run on both tiers (``kernels/corerow_py.py`` and ``_native/corerow.pyx``), so they
are compiled once, here."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..abi import (
    COL_END,
    FLAG_ROW_KIND,
    LEAF_BOOL,
    LEAF_BYTES,
    LEAF_CHAR,
    LEAF_F32,
    LEAF_F64,
    LEAF_I8,
    LEAF_I16,
    LEAF_I32,
    LEAF_I64,
    LEAF_ROW,
    LEAF_STR,
    PROGRAM_COLUMNS,
)
from ..primitives_py import kind_width
from .rowdata import RowProgram

STRING_KINDS: frozenset[int] = frozenset({LEAF_STR, LEAF_CHAR, LEAF_BYTES})
"""Kinds whose Arrow column is (offsets, data): ``string`` for STR / CHAR, ``binary`` for BYTES."""


def compile_core_row_codec(serializer: Any) -> RowProgram | None:
    """The encode / decode program of a ``RowSerializer``, or None when a field (at any depth) has
    no kernel: the caller then takes the per-value path for the whole column."""
    from ...serializers import (
        BooleanSerializer,
        BytePrimitiveArraySerializer,
        ByteSerializer,
        CharSerializer,
        DoubleSerializer,
        FloatSerializer,
        IntSerializer,
        LongSerializer,
        ShortSerializer,
        StringSerializer,
    )
    from ...serializers.tuples import RowSerializer

    kinds = {BooleanSerializer: LEAF_BOOL, ByteSerializer: LEAF_I8, ShortSerializer: LEAF_I16, IntSerializer: LEAF_I32,
             LongSerializer: LEAF_I64, FloatSerializer: LEAF_F32, DoubleSerializer: LEAF_F64, CharSerializer: LEAF_CHAR,
             StringSerializer: LEAF_STR, BytePrimitiveArraySerializer: LEAF_BYTES}
    rows: list[list[int]] = []
    paths: list[str] = []

    def visit(ser: Any, pos: int, path: str) -> bool:
        if type(ser) is RowSerializer:
            me = len(rows)
            rows.append([LEAF_ROW, pos, 0, ser.arity, 0, 0, FLAG_ROW_KIND if ser.supports_row_kind else 0, 0])
            paths.append(path)
            for i, field in enumerate(ser.field_serializers):
                if not visit(field, i, f"{path}.{ser.label(i)}" if path else ser.label(i)):
                    return False
            rows[me][COL_END] = len(rows)
            return True
        kind = kinds.get(type(ser))
        if kind is None:
            return False
        width = kind_width(kind) if kind not in (LEAF_STR, LEAF_BYTES) else 0
        rows.append([kind, pos, len(rows) + 1, 0, 0, 0, 0, width])
        paths.append(path)
        return True

    if type(serializer) is not RowSerializer or not visit(serializer, -1, ""):
        return None
    return RowProgram(np.array(rows, dtype=np.int64).reshape(-1, PROGRAM_COLUMNS), paths, [])
