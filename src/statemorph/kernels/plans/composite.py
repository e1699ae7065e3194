"""Plan compiler: flink-core Row and POJO migrate programs (composite serializers: a value is its
fields in order).

The programs run on both tiers (``kernels/composite_py.py`` and ``kernels/_native/composite.pyx``), so they
are compiled once, here."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from ..abi import (
    COL_CONST,
    COL_CONST_LEN,
    COL_EMIT_AT,
    COL_END,
    COL_KIND,
    COL_N_NEW,
    COMPOSITE_BOOL,
    COMPOSITE_BYTES,
    COMPOSITE_CONST,
    COMPOSITE_EMIT,
    COMPOSITE_F32,
    COMPOSITE_F64,
    COMPOSITE_FIXED,
    COMPOSITE_POJO,
    COMPOSITE_ROW,
    COMPOSITE_STR,
    PROGRAM_COLUMNS,
)
from .rowdata import NotByteRemappable, RowProgram


def leaf_kind(serializer: Any) -> tuple[int, int] | None:
    """(kind, width) of a DataStream serializer the remap kernels validate and copy in place, or
    None (the Row and POJO remaps share these leaves)."""
    declared = getattr(type(serializer), "leaf_kind", None)
    return _LEAVES.get(declared()) if declared is not None else None


_LEAVES = {"LEAF_BOOL": (COMPOSITE_BOOL, 1), "LEAF_I8": (COMPOSITE_FIXED, 1), "LEAF_I16": (COMPOSITE_FIXED, 2),
           "LEAF_CHAR": (COMPOSITE_FIXED, 2), "LEAF_I32": (COMPOSITE_FIXED, 4), "LEAF_F32": (COMPOSITE_F32, 4),
           "LEAF_I64": (COMPOSITE_FIXED, 8), "LEAF_F64": (COMPOSITE_F64, 8), "LEAF_STR": (COMPOSITE_STR, 0),
           "LEAF_BYTES": (COMPOSITE_BYTES, 0)}
"""(kind, width) of each leaf kind a field's serializer class declares (``BulkKernel.leaf``)."""


def compile_core_row_program(prior_snapshot: Any, new_serializer: Any) -> RowProgram:
    """Program for migrating flink-core ``Row`` bytes written under ``prior_snapshot`` (a
    ``RowSerializerSnapshot``) to ``new_serializer`` (a ``RowSerializer``).

    Raises :class:`NotByteRemappable` when a field's bytes are not copied unchanged (a nested
    value changes shape) or its type has no in-place validator here."""
    rows: list[list[int]] = []
    paths: list[str] = []
    core_row_nodes(prior_snapshot, new_serializer, -1, "", rows, paths)
    return RowProgram(np.array(rows, dtype=np.int64).reshape(-1, PROGRAM_COLUMNS), paths, [])


def core_row_nodes(snap: Any, ser: Any, pos: int, path: str, rows: list[list[int]], paths: list[str]) -> None:
    """Append the nodes of a Row written under ``snap`` and rewritten for ``ser`` (field ``pos`` of
    its parent) to ``rows`` / ``paths``; also used for Row fields inside a POJO program."""
    from ...serializers.tuples import RowSerializer, RowSerializerSnapshot

    if not isinstance(snap, RowSerializerSnapshot) or not isinstance(ser, RowSerializer):
        raise NotByteRemappable(f"{path or 'row'}: not a flink-core Row")
    if len(snap.nested_snapshots) != ser.arity:
        raise NotByteRemappable(f"{path or 'row'}: arity changed")
    me = len(rows)
    rows.append([COMPOSITE_ROW, pos, 0, ser.arity, 0, int(snap.supports_row_kind), int(ser.supports_row_kind), 0])
    paths.append(path)
    for i, (nsnap, nser) in enumerate(zip(snap.nested_snapshots, ser.field_serializers, strict=True)):
        child = f"{path}.{ser.label(i)}" if path else ser.label(i)
        if isinstance(nser, RowSerializer):
            core_row_nodes(nsnap, nser, i, child, rows, paths)
            continue
        compat = nsnap.resolve_schema_compatibility(nser)
        if not compat.is_compatible_as_is() or type(nsnap.restore_serializer()) is not type(nser):
            raise NotByteRemappable(f"{child}: value changes shape")
        leaf = leaf_kind(nser)
        if leaf is None:
            raise NotByteRemappable(f"{child}: {type(nser).__name__} has no in-place validator")
        rows.append([leaf[0], i, len(rows) + 1, 0, 0, 0, 0, leaf[1]])
        paths.append(child)
    rows[me][COL_END] = len(rows)


def compile_pojo_program(prior_snapshot: Any, new_serializer: Any) -> RowProgram:
    """Program for migrating POJO bytes written under ``prior_snapshot`` (a
    ``PojoSerializerSnapshot``) to ``new_serializer`` (a ``PojoSerializer``).

    Fields may be primitives, String, byte[], nested POJOs (remapped the same way) and flink-core
    Rows (the Row remap: RowKind flag changes). Raises :class:`NotByteRemappable` when the
    reference's output is not a function of the input bytes alone: a kept field whose value changes
    shape (its own migration, a serializer without an in-place walker here), an added field whose
    default comes from a factory (a fresh value per entry), or a dataclass whose constructor runs
    code (``__post_init__``, a custom ``__init__``) that may reject or rewrite what it is given."""
    from ...serializers.pojo import PojoSerializer, PojoSerializerSnapshot
    from ...serializers.tuples import RowSerializer

    rows: list[list[int]] = []
    paths: list[str] = []

    def plain_class(cls: type | None, path: str) -> None:
        if cls is None:
            return
        params = getattr(cls, "__dataclass_params__", None)
        if hasattr(cls, "__post_init__") or params is None or not params.init:
            raise NotByteRemappable(f"{path or 'value'}: {cls.__qualname__}'s constructor runs code of its own")

    def old_field(snap: Any, ser: Any, path: str) -> None:
        """The node(s) that read and delimit one old field written by ``ser``."""
        if isinstance(ser, PojoSerializer):
            if not isinstance(snap, PojoSerializerSnapshot):
                raise NotByteRemappable(f"{path}: not a POJO snapshot")
            visit(snap, None, path)
            return
        if isinstance(ser, RowSerializer):
            core_row_nodes(snap, ser, 0, path, rows, paths)
            return
        leaf = leaf_kind(ser)
        if leaf is None:
            raise NotByteRemappable(f"{path}: {type(ser).__name__} has no in-place walker")
        rows.append([leaf[0], 0, len(rows) + 1, 0, 0, 0, 0, leaf[1]])
        paths.append(path)

    def visit(snap: Any, new: Any, path: str) -> int:
        """Nodes of one POJO written under ``snap``; emit rows for ``new`` (None: a removed nested
        POJO, only walked). Returns the POJO's node."""
        plain_class(snap.pojo_class, path)
        me = len(rows)
        rows.append([COMPOSITE_POJO, 0, 0, len(snap.fields), 0, 0, 0, 0])
        paths.append(path)
        prior = snap.restore_serializer()
        nodes: dict[str, int] = {}
        for e, f in zip(snap.fields, prior.fields, strict=True):
            child = f"{path}.{f.name}" if path else f.name
            if f.present:
                nodes[f.name] = len(rows)
            if f.present and new is not None and f.name in new.field_serializers:
                new_ser = new.field_serializers[f.name]
                if isinstance(new_ser, PojoSerializer) and isinstance(e.value, PojoSerializerSnapshot):
                    visit(e.value, new_ser, child)  # not incompatible: the whole POJO resolved
                    continue
                if isinstance(new_ser, RowSerializer):
                    core_row_nodes(e.value, new_ser, 0, child, rows, paths)  # RowKind flag may change
                    continue
                compat = e.value.resolve_schema_compatibility(new_ser)
                if not compat.is_compatible_as_is() or type(f.serializer) is not type(new_ser):
                    raise NotByteRemappable(f"{child}: value changes shape")
            old_field(e.value, f.serializer, child)
        rows[me][COL_EMIT_AT] = len(rows)
        if new is None:
            rows[me][COL_END] = len(rows)
            return me
        plain_class(new.pojo_class, path)
        consts: list[tuple[int, bytes]] = []
        for f in new.fields:
            source = nodes.get(f.name) if f.present else None
            if source is not None:
                rows.append([COMPOSITE_EMIT, 0, len(rows) + 1, 0, source, 0, 0, 0])
            else:
                consts.append((len(rows), _added_bytes(new, f, path)))
                rows.append([COMPOSITE_EMIT, 0, len(rows) + 1, 0, -1, 0, 0, 0])
            paths.append(f"{path}.{f.name}" if path else f.name)
        rows[me][COL_N_NEW] = len(new.fields)
        for at, raw in consts:
            rows[at][COL_CONST], rows[at][COL_CONST_LEN] = len(rows), len(raw)
            for k in range(0, len(raw), PROGRAM_COLUMNS - 1):
                chunk = raw[k:k + PROGRAM_COLUMNS - 1]
                rows.append([COMPOSITE_CONST, *chunk] + [0] * (PROGRAM_COLUMNS - 1 - len(chunk)))
                paths.append("")
        rows[me][COL_END] = len(rows)
        return me

    if prior_snapshot.registered_subclasses or prior_snapshot.nonregistered_subclasses:
        raise NotByteRemappable("subclass serializers")
    visit(prior_snapshot, new_serializer, "")
    return RowProgram(np.array(rows, dtype=np.int64).reshape(-1, PROGRAM_COLUMNS), paths, [])


def _added_bytes(new: Any, f: Any, path: str) -> bytes:
    """What the reference writes for a field the old bytes lack: null, or the dataclass default."""
    from ...io import DataOutputSerializer

    if f.present and new.pojo_class is not None:
        spec = {d.name: d for d in dataclasses.fields(new.pojo_class)}[f.name]
        if spec.default_factory is not dataclasses.MISSING:
            raise NotByteRemappable(f"{path}.{f.name}: added with a default factory (a fresh value per entry)")
    value = new.default_value(f.name) if f.present else None
    if value is None:
        return b"\x01"
    out = DataOutputSerializer()
    f.serializer.serialize(value, out)
    return b"\x00" + out.get_copy_of_buffer()


def pojo_growth(matrix: np.ndarray) -> int:
    """Most bytes a migration adds to one entry: the constants of added fields. Everything else only
    shrinks (removed fields, canonical varints), so with the input span this bounds the output."""
    emits = matrix[matrix[:, COL_KIND] == COMPOSITE_EMIT]
    return int(emits[:, COL_CONST_LEN].sum())
