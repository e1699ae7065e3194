"""POJO (``PojoSerializer``) migration, byte to byte: the program compiler and the Python twin of
``pojo_migrate_run`` in ``_native/remap.pyx`` (same arguments, same effect on the output buffers).

A POJO value is ``flags ‖ for each field in byte order: null flag ‖ [field bytes]``
(flink-formats.md §2.10). Migrating it between compatible schemas (fields added, removed,
reordered by name, nested POJOs evolving the same way) moves whole fields: kept fields are copied
in the new order, removed ones are validated and skipped, added ones get the bytes the per-value
reference writes for them (null flag ``01``, or ``00`` and the dataclass default). Fields are
copied *canonically*, because the reference (and Flink, which migrates through Java objects)
re-serializes values: a boolean byte other than 0 becomes ``01``, every float / double NaN becomes
the canonical NaN, string varints are rewritten minimally, and a non-null field whose value reads as
null (a null ``StringValue``, a nested POJO with flags ``01``) is written with null flag ``01``.

Program (int64 matrix, ``_batch.NCOL`` columns). A POJO node ``[P_POJO, -, END, N_OLD, EMIT,
N_NEW, -, -]`` is followed by its old fields in old byte order (each a leaf ``[kind, -, END, -, -,
-, -, WIDTH]`` of the flink-core Row remap's leaf kinds ``_batch.S_*``, or a nested POJO subtree),
then its ``N_NEW`` emit rows ``[P_EMIT, -, END, -, SRC, CONST, CONST_LEN, -]`` in new byte order
(``SRC`` the old field's node, or -1 for the constant bytes at ``CONST``), then the constants,
seven bytes per ``[P_CONST, b0, .., b6]`` row. The leaf checks and canonical copies are shared with
the Row remap (``_batch.check_leaf`` / ``put_canonical`` and their compiled twins).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from ._batch import (
    C_END,
    C_KIND,
    C_WIDTH,
    E_BAD_FLAG,
    E_OK,
    E_TRAILING,
    E_TRUNCATED,
    NCOL,
    NUL,
    REWRITE,
    S_ROW,
    NotByteRemappable,
    RowProgram,
    _Bin,
    _core_row_walk,
    _RowError,
    check_leaf,
    check_outputs,
    core_row_nodes,
    encode_err,
    leaf_kind,
    put_canonical,
)

P_POJO, P_EMIT, P_CONST = 10, 8, 9  # apart from the Row remap kinds S_* (1..7) it embeds
C_N_OLD, C_EMIT, C_N_NEW = 3, 4, 5
C_SRC, C_CONST, C_CONST_LEN = 4, 5, 6


def compile_pojo_program(prior_snapshot: Any, new_serializer: Any) -> RowProgram:
    """Program for migrating POJO bytes written under ``prior_snapshot`` (a
    ``PojoSerializerSnapshot``) to ``new_serializer`` (a ``PojoSerializer``).

    Fields may be primitives, String, byte[], nested POJOs (remapped the same way) and flink-core
    Rows (the Row remap: RowKind flag changes). Raises :class:`NotByteRemappable` when the
    reference's output is not a function of the input bytes alone: a kept field whose value changes
    shape (its own migration, a serializer without an in-place walker here), an added field whose
    default comes from a factory (a fresh value per entry), or a dataclass whose constructor runs
    code (``__post_init__``, a custom ``__init__``) that may reject or rewrite what it is given."""
    from .pojo import PojoSerializer, PojoSerializerSnapshot
    from .tuples import RowSerializer

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
        rows.append([P_POJO, 0, 0, len(snap.fields), 0, 0, 0, 0])
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
        rows[me][C_EMIT] = len(rows)
        if new is None:
            rows[me][C_END] = len(rows)
            return me
        plain_class(new.pojo_class, path)
        consts: list[tuple[int, bytes]] = []
        for f in new.fields:
            source = nodes.get(f.name) if f.present else None
            if source is not None:
                rows.append([P_EMIT, 0, len(rows) + 1, 0, source, 0, 0, 0])
            else:
                consts.append((len(rows), _added_bytes(new, f, path)))
                rows.append([P_EMIT, 0, len(rows) + 1, 0, -1, 0, 0, 0])
            paths.append(f"{path}.{f.name}" if path else f.name)
        rows[me][C_N_NEW] = len(new.fields)
        for at, raw in consts:
            rows[at][C_CONST], rows[at][C_CONST_LEN] = len(rows), len(raw)
            for k in range(0, len(raw), NCOL - 1):
                chunk = raw[k:k + NCOL - 1]
                rows.append([P_CONST, *chunk] + [0] * (NCOL - 1 - len(chunk)))
                paths.append("")
        rows[me][C_END] = len(rows)
        return me

    if prior_snapshot.registered_subclasses or prior_snapshot.nonregistered_subclasses:
        raise NotByteRemappable("subclass serializers")
    visit(prior_snapshot, new_serializer, "")
    return RowProgram(np.array(rows, dtype=np.int64).reshape(-1, NCOL), paths, [])


def _added_bytes(new: Any, f: Any, path: str) -> bytes:
    """What the reference writes for a field the old bytes lack: null, or the dataclass default."""
    from ..io import DataOutputSerializer

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


# ---------------------------------------------------------------------------------- the twin
class _Walk:
    """One entry's walk state: per old node, where its bytes start and end and its state (NUL: reads
    as null, REWRITE: a string to re-encode)."""

    def __init__(self, p: list[list[int]], d: bytes) -> None:
        self.p = p
        self.d = d
        self.start = [0] * len(p)
        self.stop = [0] * len(p)
        self.state = [0] * len(p)
        self.err = -1

    def fail(self, code: int, node: int) -> _RowError:
        self.err = node
        return _RowError(code)

    def check(self, node: int, pos: int, end: int) -> int:
        """Validate the POJO at ``pos`` (mirror of ``pojo_check``); returns the next position."""
        p, d = self.p, self.d
        if pos >= end:
            raise self.fail(E_TRUNCATED, node)
        flags = d[pos]
        pos += 1
        self.state[node] = NUL if flags == 1 else 0
        if flags == 1:
            return pos
        if flags != 2:
            raise self.fail(E_BAD_FLAG, node)
        child = node + 1
        for _ in range(p[node][C_N_OLD]):
            if pos >= end:
                raise self.fail(E_TRUNCATED, child)
            flag = d[pos]
            pos += 1
            if flag > 1:
                raise self.fail(E_BAD_FLAG, child)
            self.state[child] = NUL if flag else 0
            self.start[child] = pos
            if flag == 0 and p[child][C_KIND] == P_POJO:
                pos = self.check(child, pos, end)
            elif flag == 0 and p[child][C_KIND] == S_ROW:
                err = [-1]
                try:
                    _size, pos = _core_row_walk(p, child, d, pos, end, None, err)
                except _RowError as x:
                    raise self.fail(x.code, err[0]) from None
                self.stop[child] = pos
            elif flag == 0:
                code, self.state[child], pos = check_leaf(d, pos, end, p[child][C_KIND], p[child][C_WIDTH])
                if code != E_OK:
                    raise self.fail(code, child)
                self.stop[child] = pos
            child = p[child][C_END]
        return pos

    def emit(self, node: int, out: bytearray) -> None:
        """Write the checked POJO ``node`` in the new layout (mirror of ``pojo_emit``)."""
        p = self.p
        if self.state[node] == NUL:
            out.append(1)
            return
        out.append(2)
        row = p[node][C_EMIT]
        for _ in range(p[node][C_N_NEW]):
            src = p[row][C_SRC]
            if src < 0:
                c, n = p[row][C_CONST], p[row][C_CONST_LEN]
                out += bytes(v for r in p[c:c + (n + NCOL - 2) // (NCOL - 1)] for v in r[1:])[:n]
            elif self.state[src] == NUL:
                out.append(1)
            else:
                out.append(0)
                if p[src][C_KIND] == P_POJO:
                    self.emit(src, out)
                elif p[src][C_KIND] == S_ROW:
                    _core_row_walk(p, src, self.d, self.start[src], self.stop[src], out, [-1])
                else:
                    out += put_canonical(p[src][C_KIND], self.d, self.start[src], self.stop[src],
                                         self.state[src] == REWRITE)
            row += 1


def pojo_migrate_run(prog: Any, offsets: Any, data: Any, validity: Any, offset: int, wide: bool, start: int,
                     stop: int, out_off: Any, out_data: Any, pos: int) -> tuple[int, int, int]:
    """One-pass POJO migrate, the contract of ``_batch.migrate_run``: validate and write each entry
    packed from ``out_data[pos]``, its end in ``out_off[i + 1]``; returns ``(next_row, pos, status)``
    (``status < 0``: entry ``next_row`` is bad; else ``next_row < stop``: it did not fit)."""
    check_outputs("pojo_migrate_run", out_off, out_data, start, stop, pos)
    v = _Bin(offsets, data, validity, offset, wide, stop)
    p = np.asarray(prog, dtype=np.int64).tolist()
    if not p or len(p[0]) != NCOL or p[0][C_KIND] != P_POJO:
        raise ValueError("bad POJO program")
    out = memoryview(out_data).cast("B")
    status = 0
    i = start
    while i < stop:
        if v.valid(i):
            code, s, e = v.entry(i)
            w = _Walk(p, v.data)
            if code == E_OK:
                try:
                    if w.check(0, s, e) != e:
                        w.err, code = -1, E_TRAILING
                except _RowError as x:
                    code = x.code
            if code == E_OK:
                buf = bytearray()
                w.emit(0, buf)
                if len(buf) > len(out) - pos:
                    break
                out[pos:pos + len(buf)] = buf
                pos += len(buf)
            else:
                status = encode_err(code, w.err)
        out_off[i + 1] = pos
        if status:
            break
        i += 1
    return i, pos, status


def pojo_growth(matrix: np.ndarray) -> int:
    """Most bytes a migration adds to one entry: the constants of added fields. Everything else only
    shrinks (removed fields, canonical varints), so with the input span this bounds the output."""
    emits = matrix[matrix[:, C_KIND] == P_EMIT]
    return int(emits[:, C_CONST_LEN].sum())
