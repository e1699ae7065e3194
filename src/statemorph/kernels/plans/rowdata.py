"""Plan compilers for BinaryRowData: a row type, or a RowData migration plan (a schema pair),
becomes the flat int64 program the RowData kernels (compiled, Python twin and JIT) execute.

Why here: every tier runs the same program, so it is compiled once, in Python, and the kernels
never see a schema. :class:`RowProgram` and :class:`NotByteRemappable` are shared by the other
plan compilers (flink-core Row, POJO, Avro).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...types import (
    ArrayType,
    DecimalType,
    LocalZonedTimestampType,
    LogicalType,
    LogicalTypeVisitor,
    MapType,
    MultisetType,
    RowType,
    TimestampType,
)
from ..abi import (
    COL_END,
    COL_FLAGS,
    COL_KIND,
    FLAG_NOT_NULL,
    FLAG_VERBATIM,
    PROGRAM_COLUMNS,
    SLOT_ARRAY,
    SLOT_BIN,
    SLOT_BLOB,
    SLOT_BOOL,
    SLOT_DEC_BIG,
    SLOT_DEC_COMPACT,
    SLOT_F32,
    SLOT_F64,
    SLOT_I8,
    SLOT_I16,
    SLOT_I32,
    SLOT_I64,
    SLOT_MAP,
    SLOT_ROW,
    SLOT_STR,
    SLOT_TS_BIG,
)

#: kinds the encode / decode kernels handle (Arrow ↔ slot); other types take the per-value path
ARROW_KINDS = frozenset({SLOT_BOOL, SLOT_I8, SLOT_I16, SLOT_I32, SLOT_I64, SLOT_F32, SLOT_F64, SLOT_STR, SLOT_BIN,
                         SLOT_ROW, SLOT_DEC_COMPACT, SLOT_DEC_BIG, SLOT_TS_BIG})
#: array elements (and map keys / values) the kernels handle, besides rows, arrays and maps
_SCALAR_ELEMENTS = frozenset({SLOT_BOOL, SLOT_I8, SLOT_I16, SLOT_I32, SLOT_I64, SLOT_F32, SLOT_F64, SLOT_STR, SLOT_BIN,
                              SLOT_DEC_COMPACT})
#: bytes of one value in the Arrow column of a slot kind
ARROW_WIDTH = {SLOT_I8: 1, SLOT_I16: 2, SLOT_I32: 4, SLOT_F32: 4, SLOT_I64: 8, SLOT_F64: 8, SLOT_DEC_COMPACT: 16,
               SLOT_DEC_BIG: 16, SLOT_TS_BIG: 8}


_SLOTS = {"BOOL": SLOT_BOOL, "I8": SLOT_I8, "I16": SLOT_I16, "I32": SLOT_I32, "I64": SLOT_I64, "F32": SLOT_F32,
          "F64": SLOT_F64, "STR": SLOT_STR, "BIN": SLOT_BIN, "ROW": SLOT_ROW, "DEC_COMPACT": SLOT_DEC_COMPACT,
          "DEC_BIG": SLOT_DEC_BIG, "TS_BIG": SLOT_TS_BIG, "ARRAY": SLOT_ARRAY, "MAP": SLOT_MAP,
          "BLOB": SLOT_BLOB}
"""The ABI's slot kind of each BinaryRowData layout a type declares (``LogicalType.row_slot``)."""


def slot_kind(t: LogicalType) -> int:
    """How a field of type ``t`` lives in a BinaryRowData slot."""
    slot = _SLOTS.get(t.row_slot())
    if slot is None:
        raise NotImplementedError(f"no BinaryRowData slot layout for {t}")
    return slot


class RowProgram:
    """A compiled program plus the field path of every node (for error messages)."""

    def __init__(self, matrix: np.ndarray, paths: list[str], types: list[LogicalType]) -> None:
        self.matrix = matrix
        self.paths = paths
        self.types = types

    @property
    def kinds(self) -> list[int]:
        return [int(k) for k in self.matrix[:, COL_KIND]]

    def decode_supported(self) -> bool:
        """The decode kernels handle the ARROW_KINDS, and ARRAYs / MAPs of those (but DECIMAL(p > 18)
        and TIMESTAMP(p > 3)), of rows, arrays and maps, at any depth."""
        return self._supported()

    def encode_supported(self) -> bool:
        """As decode, but for MAPs whose key type holds an ARRAY or a MAP: the reference reads such a
        key as a list or dict, which cannot be a dict key, and fails; the kernels would not."""
        kinds = self.kinds
        maps = [c for c, k in enumerate(kinds) if k == SLOT_MAP]
        keys = [(c + 2, int(self.matrix[c + 1, COL_END])) for c in maps]  # the key element's subtree
        return self._supported() and not any(SLOT_ARRAY in kinds[a:b] or SLOT_MAP in kinds[a:b] for a, b in keys)

    def _supported(self) -> bool:
        kinds = self.kinds
        elements = _SCALAR_ELEMENTS | {SLOT_ROW, SLOT_ARRAY, SLOT_MAP}
        return all(k in ARROW_KINDS or k == SLOT_MAP or (k == SLOT_ARRAY and kinds[c + 1] in elements)
                   for c, k in enumerate(kinds) if c)

    def path(self, node: int) -> str:
        return self.paths[node] if 0 <= node < len(self.paths) else ""


class _Node(LogicalTypeVisitor[tuple[int, list[tuple[int, str, LogicalType]]]]):
    """The limit of one program node (a DECIMAL's digits, a big timestamp's nanosecond bound)
    and its children as (position, path, type): a row's fields, an array's element, a map's key
    and value arrays."""

    def __init__(self, path: str) -> None:
        self.path = path

    def visit_other(self, t: LogicalType) -> tuple[int, list[tuple[int, str, LogicalType]]]:
        return 0, []

    def visit_decimal(self, t: DecimalType) -> tuple[int, list[tuple[int, str, LogicalType]]]:
        return (10 ** t.precision if t.is_compact else t.precision), []

    def visit_any_timestamp(self, t: TimestampType | LocalZonedTimestampType
                            ) -> tuple[int, list[tuple[int, str, LogicalType]]]:
        return (0 if t.is_compact else 1000 if t.precision <= 6 else 1_000_000), []

    def visit_row(self, t: RowType) -> tuple[int, list[tuple[int, str, LogicalType]]]:
        return 0, [(j, f"{self.path}.{f.name}" if self.path else f.name, f.type) for j, f in enumerate(t.fields)]

    def visit_array(self, t: ArrayType) -> tuple[int, list[tuple[int, str, LogicalType]]]:
        return 0, [(0, f"{self.path}[]", t.element_type)]

    def visit_map(self, t: MapType | MultisetType) -> tuple[int, list[tuple[int, str, LogicalType]]]:
        key, value = t.map_parts()
        return 0, [(0, f"{self.path}.key", ArrayType(key)), (0, f"{self.path}.value", ArrayType(value))]

    visit_multiset = visit_map


_PARAMETERIZED = frozenset({SLOT_ROW, SLOT_ARRAY, SLOT_MAP, SLOT_DEC_COMPACT, SLOT_DEC_BIG, SLOT_TS_BIG})
"""Slot kinds whose node has a limit or children (:class:`_Node`); the others are plain leaves."""


def _type_nodes(t: LogicalType, pos: int, src: int, path: str, rows: list[list[int]], paths: list[str],
                types: list[LogicalType], verbatim: bool) -> None:
    """Append the identity (old = new) program of a field of type ``t``: nested rows, and arrays /
    maps with their element programs (what the kernels need to validate them)."""
    me = len(rows)
    k = slot_kind(t)
    nested = k in (SLOT_ROW, SLOT_ARRAY, SLOT_MAP)
    flags = (0 if t.stores_null else FLAG_NOT_NULL) | (FLAG_VERBATIM if verbatim and nested else 0)
    arity = t.arity if isinstance(t, RowType) else 0
    limit, children = t.accept(_Node(path)) if k in _PARAMETERIZED else (0, ())
    rows.append([k, pos, 0, arity, src, arity, flags, limit])
    paths.append(path)
    types.append(t)
    for j, child_path, child in children:
        _type_nodes(child, j, j, child_path, rows, paths, types, verbatim)
    rows[me][COL_END] = len(rows)


def compile_row_program(row_type: RowType) -> RowProgram:
    """The program for encoding / decoding ``row_type`` (old = new; SRC = POS)."""
    rows: list[list[int]] = []
    paths: list[str] = []
    types: list[LogicalType] = []
    _type_nodes(row_type, -1, -1, "", rows, paths, types, False)
    rows[0][COL_FLAGS] &= ~FLAG_NOT_NULL
    return RowProgram(np.array(rows, dtype=np.int64).reshape(-1, PROGRAM_COLUMNS), paths, types)


class NotByteRemappable(Exception):
    """A schema pair whose migration no byte program expresses (raised by the flink-core Row, POJO and
    Avro compilers): the column keeps the per-value path."""


def compile_migration_program(plan: Any) -> RowProgram:
    """Compile a :class:`statemorph.migration.RowMigrationPlan` into a migrate program.

    ``"copy"`` fields keep their old layout (nested rows, arrays and maps marked verbatim: copied
    after validation); ``"row"`` / ``"array"`` / ``"map"`` migrations recurse (array and map
    elements are remapped one by one)."""
    rows: list[list[int]] = []
    paths: list[str] = []
    types: list[LogicalType] = []

    def visit_row(p: Any, pos: int, src: int, path: str, flags: int, t: LogicalType) -> None:
        me = len(rows)
        rows.append([SLOT_ROW, pos, 0, len(p.fields), src, p.old_type.arity, flags, 0])
        paths.append(path)
        types.append(t)
        for j, f in enumerate(p.fields):
            child = f"{path}.{f.name}" if path else f.name
            nflags = 0 if f.type.stores_null else FLAG_NOT_NULL
            if f.source < 0:
                rows.append([slot_kind(f.type), j, len(rows) + 1, 0, -1, 0, nflags, 0])
                paths.append(child)
                types.append(f.type)
                continue
            visit_mig(f.migration, j, f.source, child, nflags)
        rows[me][COL_END] = len(rows)

    def visit_array(m: Any, path: str) -> None:
        """An array node (element migration ``m``) as it appears inside a map."""
        if m.is_copy:
            _type_nodes(ArrayType(m.old_type), 0, 0, path, rows, paths, types, True)
            return
        me = len(rows)
        rows.append([SLOT_ARRAY, 0, 0, 0, 0, 0, 0, 0])
        paths.append(path)
        types.append(ArrayType(m.new_type))
        visit_mig(m, 0, 0, f"{path}[]", 0)
        rows[me][COL_END] = len(rows)

    def visit_mig(m: Any, pos: int, src: int, path: str, nflags: int) -> None:
        if m.kind == "copy":
            root = len(rows)
            _type_nodes(m.old_type, pos, src, path, rows, paths, types, True)
            rows[root][COL_FLAGS] = (rows[root][COL_FLAGS] & ~FLAG_NOT_NULL) | nflags
        elif m.kind == "row":
            visit_row(m.row, pos, src, path, nflags, m.new_type)
        elif m.kind == "array":
            me = len(rows)
            rows.append([SLOT_ARRAY, pos, 0, 0, src, 0, nflags, 0])
            paths.append(path)
            types.append(m.new_type)
            visit_mig(m.element, 0, 0, f"{path}[]", 0)
            rows[me][COL_END] = len(rows)
        else:
            me = len(rows)
            rows.append([SLOT_MAP, pos, 0, 0, src, 0, nflags, 0])
            paths.append(path)
            types.append(m.new_type)
            visit_array(m.key, f"{path}.key")
            visit_array(m.value, f"{path}.value")
            rows[me][COL_END] = len(rows)

    visit_row(plan, -1, -1, "", FLAG_VERBATIM if plan.is_identity else 0, plan.new_type)
    if any(r[COL_KIND] == SLOT_BLOB for r in rows):
        raise NotByteRemappable("a RAW data-view placeholder: migrated per value")
    return RowProgram(np.array(rows, dtype=np.int64).reshape(-1, PROGRAM_COLUMNS), paths, types)


