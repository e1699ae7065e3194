"""Plan compiler: flink-core Row encode / decode programs (``RowSerializer`` <-> Arrow struct columns).

The programs run on both tiers (``kernels/corerow_py.py`` and ``kernels/_native/corerow.pyx``), so they
are compiled once, here."""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import abi
from ..primitives_py import kind_width
from .rowdata import RowProgram

STRING_KINDS: frozenset[int] = frozenset({abi.LEAF_STR, abi.LEAF_CHAR, abi.LEAF_BYTES})
"""Kinds whose Arrow column is (offsets, data): ``string`` for STR / CHAR, ``binary`` for BYTES."""


_LEAVES = {"LEAF_BOOL": abi.LEAF_BOOL, "LEAF_I8": abi.LEAF_I8, "LEAF_I16": abi.LEAF_I16, "LEAF_I32": abi.LEAF_I32,
           "LEAF_I64": abi.LEAF_I64, "LEAF_F32": abi.LEAF_F32, "LEAF_F64": abi.LEAF_F64, "LEAF_CHAR": abi.LEAF_CHAR,
           "LEAF_STR": abi.LEAF_STR, "LEAF_BYTES": abi.LEAF_BYTES}
"""The leaf kinds a flink-core Row field may declare (``BulkKernel.leaf`` of its serializer class)."""


def compile_core_row_codec(serializer: Any) -> RowProgram | None:
    """The encode / decode program of a ``RowSerializer``, or None when a field (at any depth) has
    no kernel: the caller then takes the per-value path for the whole column."""
    from ...serializers.tuples import RowSerializer

    rows: list[list[int]] = []
    paths: list[str] = []

    def visit(ser: Any, pos: int, path: str) -> bool:
        if type(ser) is RowSerializer:
            me = len(rows)
            rows.append([abi.LEAF_ROW, pos, 0, ser.arity, 0, 0, abi.FLAG_ROW_KIND if ser.supports_row_kind else 0, 0])
            paths.append(path)
            for i, field in enumerate(ser.field_serializers):
                if not visit(field, i, f"{path}.{ser.label(i)}" if path else ser.label(i)):
                    return False
            rows[me][abi.COL_END] = len(rows)
            return True
        kind = _LEAVES.get(type(ser).leaf_kind())
        if kind is None:
            return False
        width = kind_width(kind) if kind not in (abi.LEAF_STR, abi.LEAF_BYTES) else 0
        rows.append([kind, pos, len(rows) + 1, 0, 0, 0, 0, width])
        paths.append(path)
        return True

    if type(serializer) is not RowSerializer or not visit(serializer, -1, ""):
        return None
    return RowProgram(np.array(rows, dtype=np.int64).reshape(-1, abi.PROGRAM_COLUMNS), paths, [])
