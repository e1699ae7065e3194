"""Plan compiler: flink-core Row encode / decode programs (``RowSerializer`` <-> Arrow struct columns).

The programs run on both tiers (``kernels/corerow_py.py`` and ``_native/corerow.pyx``), so they
are compiled once, here."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..abi import (
    C_END,
    F_ROW_KIND,
    K_BOOL,
    K_BYTES,
    K_CHAR,
    K_F32,
    K_F64,
    K_I8,
    K_I16,
    K_I32,
    K_I64,
    K_ROW,
    K_STR,
    NCOL,
)
from ..primitives_py import kind_width
from .rowdata import RowProgram

STRING_KINDS: frozenset[int] = frozenset({K_STR, K_CHAR, K_BYTES})
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

    kinds = {BooleanSerializer: K_BOOL, ByteSerializer: K_I8, ShortSerializer: K_I16, IntSerializer: K_I32,
             LongSerializer: K_I64, FloatSerializer: K_F32, DoubleSerializer: K_F64, CharSerializer: K_CHAR,
             StringSerializer: K_STR, BytePrimitiveArraySerializer: K_BYTES}
    rows: list[list[int]] = []
    paths: list[str] = []

    def visit(ser: Any, pos: int, path: str) -> bool:
        if type(ser) is RowSerializer:
            me = len(rows)
            rows.append([K_ROW, pos, 0, ser.arity, 0, 0, F_ROW_KIND if ser.supports_row_kind else 0, 0])
            paths.append(path)
            for i, field in enumerate(ser.field_serializers):
                if not visit(field, i, f"{path}.{ser.label(i)}" if path else ser.label(i)):
                    return False
            rows[me][C_END] = len(rows)
            return True
        kind = kinds.get(type(ser))
        if kind is None:
            return False
        rows.append([kind, pos, len(rows) + 1, 0, 0, 0, 0, kind_width(kind) if kind not in (K_STR, K_BYTES) else 0])
        paths.append(path)
        return True

    if type(serializer) is not RowSerializer or not visit(serializer, -1, ""):
        return None
    return RowProgram(np.array(rows, dtype=np.int64).reshape(-1, NCOL), paths, [])
