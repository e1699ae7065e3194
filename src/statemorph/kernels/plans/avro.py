"""Avro (``AvroSerializer``) migration, byte to byte: the program compiler and the Python twin of
``avro_migrate_run`` in ``kernels/_native/avro.pyx`` (same arguments, same effect on the output buffers).

Why a byte program: Avro's schema resolution is a walk of the writer's bytes driven by the
(writer, reader) schema pair alone, so it compiles once into a flat table of ops; the kernel then
rewrites every entry without a Python object. The ops mirror what the per-value reference does
(decode with the old schema, ``_avro_resolve`` transform, encode with the new one; ``serializers/avro.py``
§2.11 for the bytes), including its re-encodings: a boolean byte other than 0 becomes ``01``, every
NaN becomes the canonical NaN, arrays and maps are re-emitted as one block (``VARLEN(count)`` ‖
items ‖ ``00``, or just ``00``), removed fields are still validated (the reference decodes them),
``date`` / ``time-*`` / ``timestamp-*`` values outside what Python's datetime holds are bad rows.

What the program cannot express raises :class:`NotByteRemappable` at compile time and the column
keeps the per-value path: recursive schemas, a kept union whose decoded value could fit a branch
other than the one written (the reference re-picks the branch from the value: ``[int, long]``,
``[double, int]``, ``[string, enum]``, two records ...), ``decimal`` / ``uuid`` values (the reference re-encodes them,
and may reject one), a reader logical type the writer does not have, an added field whose default
the reference cannot write. Two value-dependent cases stop the kernel at the entry with
``HAND_BACK`` instead, and arrow.py migrates that one entry per value: a kept map with a
duplicate key (the reference's dict keeps one) and ``bytes`` → ``string`` of invalid UTF-8 (the
reference raises).

Program (int64 matrix, ``PROGRAM_COLUMNS`` columns ``OP, EMIT, A, B, C, D, E, UNION``). Row 0 is a header
``[AVRO_OP_HEAD, BUDGET, N_ROWS, ROOT, SCRATCH, GROWTH, CONSTS, -]`` (``BUDGET``: the zero-width items
one entry may hold, the reference's ``ZERO_WIDTH_ITEM_BUDGET``); rows ``1..N_ROWS-1`` are ops; the tail
after them holds the tables (int64 entries, addressed by their index in the tail) and, from tail
index ``CONSTS``, the constant bytes of defaults (packed eight per int64, addressed by byte
offset). Each op reads one writer value at the cursor; unless ``EMIT`` is ``EMIT_SKIP`` it also writes
the reader value (first the reader union branch index ``UNION`` as i32 BE when >= 0). Ops:

- ``AVRO_OP_NULL``; ``AVRO_OP_BOOL``; ``AVRO_OP_INT`` / ``AVRO_OP_LONG`` (``A``..``B``: the range the
  writer's logical type holds) and ``AVRO_OP_FLOAT`` / ``AVRO_OP_DOUBLE``, written as ``EMIT`` =
  ``EMIT_VALUE`` or ``EMIT_I64`` / ``EMIT_F32`` / ``EMIT_F64`` (promotions, canonical NaNs);
  ``AVRO_OP_BLOB`` (string / bytes; ``A``: UTF-8 checked as a writer string; ``EMIT`` = ``EMIT_UTF8``:
  bytes to a reader string); ``AVRO_OP_FIXED`` (``A`` bytes);
- ``AVRO_OP_ENUM``: ``A`` symbols, table ``B``: writer index → reader index (``EMIT`` = ``EMIT_VALUE`` when
  the indexes stay);
- ``AVRO_OP_UNION``: ``A`` branches, table ``B``: the op of each writer branch;
- ``AVRO_OP_ARRAY`` / ``AVRO_OP_MAP``: item op ``A``, ``B`` the fewest bytes one item takes (``min_size``, +4
  for the key), which bounds block counts as the reference does (zero-width items share a budget);
- ``AVRO_OP_RECORD``: ``A`` writer fields with their ops in table ``B``; ``C`` reader fields, table ``D``
  of ``(writer field, op, const offset, const length)`` (writer field -1: the constant bytes of a
  default); ``E`` -1 when the kept writer fields come in reader order (one pass), else the offset in
  the scratch array where a first pass records each writer field's start (and the record's end)
  for the second, which copies a field whose op writes ``EMIT_VALUE`` (and no union index) as it is,
  without checking it again.

An error's node names the field path the reference reports (its innermost record field).
"""

from __future__ import annotations

import datetime as _dt
from typing import Any

import numpy as np

from ...serializers._avro_codec import ZERO_WIDTH_ITEM_BUDGET, min_size
from ...serializers._avro_schema import (
    ArrayNode,
    AvroNode,
    EnumNode,
    FixedNode,
    MapNode,
    NamedNode,
    RecordNode,
    UnionNode,
)
from ...serializers._avro_values import INT_MAX, INT_MIN, LONG_MAX, LONG_MIN, DefaultError, default_value, logical_type
from ..abi import (
    AVRO_OP_ARRAY,
    AVRO_OP_BLOB,
    AVRO_OP_BOOL,
    AVRO_OP_DOUBLE,
    AVRO_OP_ENUM,
    AVRO_OP_FIXED,
    AVRO_OP_FLOAT,
    AVRO_OP_HEAD,
    AVRO_OP_INT,
    AVRO_OP_LONG,
    AVRO_OP_MAP,
    AVRO_OP_NULL,
    AVRO_OP_RECORD,
    AVRO_OP_UNION,
    COL_A,
    COL_B,
    COL_C,
    COL_D,
    COL_E,
    COL_EMIT,
    COL_UNION,
    EMIT_BOOL,
    EMIT_F32,
    EMIT_F64,
    EMIT_I32,
    EMIT_I64,
    EMIT_SKIP,
    EMIT_TREE,
    EMIT_UTF8,
    EMIT_VALUE,
    PROGRAM_COLUMNS,
)
from .rowdata import NotByteRemappable, RowProgram

MAX_NODES = 1 << 16  # a schema that expands (shared named types) past this keeps the per-value path


_EPOCH = _dt.datetime(1970, 1, 1)


_BYTES = {EMIT_I32: 4, EMIT_I64: 8, EMIT_F32: 4, EMIT_F64: 8}


def _micros(t: _dt.datetime) -> int:
    d = t - _EPOCH
    return (d.days * 86400 + d.seconds) * 1_000_000 + d.microseconds


_DAYS = ((_dt.date.min - _EPOCH.date()).days, (_dt.date.max - _EPOCH.date()).days)


_US = (_micros(_dt.datetime.min), _micros(_dt.datetime.max))


# the raw values each logical type's ``from_raw`` accepts (_avro_values): outside, a bad row
_RANGES = {
    "date": _DAYS,
    "time-millis": (0, 86_399_999),
    "time-micros": (0, 86_399_999_999),
    "timestamp-millis": (-(-_US[0] // 1000), _US[1] // 1000),
    "local-timestamp-millis": (-(-_US[0] // 1000), _US[1] // 1000),
    "timestamp-micros": _US,
    "local-timestamp-micros": _US,
}


_WIDTHS = {"int": EMIT_I32, "long": EMIT_I64, "float": EMIT_F32, "double": EMIT_F64}


_PROMOTABLE = {("int", "long"), ("int", "float"), ("int", "double"), ("long", "float"), ("long", "double"),
               ("float", "double")}


# the Python values a decoded branch can hold, as the union branch chooser sees them
_GROUP = {"null": 0, "boolean": 1, "int": 2, "long": 2, "float": 2, "double": 2, "string": 3, "enum": 3,
          "bytes": 4, "fixed": 4, "array": 5, "map": 6, "record": 6}


def _first_paths(n: AvroNode, path: str, first: dict[int, str]) -> None:
    """The path each named type of the writer schema is first met at, in the order the codec
    compiles its readers: the reference reads a shared type with one reader, whose errors name
    the fields under that first path wherever the value is (and so do ours)."""
    if isinstance(n, NamedNode):
        if id(n) in first:
            return
        first[id(n)] = path
    if isinstance(n, RecordNode):
        for f in n.fields:
            _first_paths(f.type, f"{path}.{f.name}", first)
    elif isinstance(n, UnionNode):
        for b in n.branches:
            _first_paths(b, path, first)
    elif isinstance(n, ArrayNode):
        _first_paths(n.items, path + "[]", first)
    elif isinstance(n, MapNode):
        _first_paths(n.values, path + "{}", first)


def _branch_kept(union: UnionNode) -> bool:
    """Whether the reference writes a decoded value of each branch back in that branch: its
    chooser (``AvroCodec._chooser``) takes the first branch whose type fits the Python value. A
    value of one branch fits no other one when branches that share a kind of value tell them apart:
    an int or long followed by a float or double (an int fits the real branch, but the integer one
    comes first; a float fits no integer branch), enums without a common symbol, fixed types of
    different sizes."""
    shared: dict[int, list[AvroNode]] = {}
    for b in union.branches:
        shared.setdefault(_GROUP[b.kind], []).append(b)
    for group in shared.values():
        if len(group) < 2:
            continue
        if any(logical_type(b) is not None for b in group):
            return False
        kinds = [b.kind for b in group]
        if kinds in (["int", "float"], ["int", "double"], ["long", "float"], ["long", "double"]):
            continue
        if all(isinstance(b, EnumNode) for b in group):
            symbols = [s for b in group if isinstance(b, EnumNode) for s in b.symbols]
            if len(set(symbols)) == len(symbols):
                continue
        if all(isinstance(b, FixedNode) for b in group):
            sizes = [b.size for b in group if isinstance(b, FixedNode)]
            if len(set(sizes)) == len(sizes):
                continue
        return False
    return True


class _Compiler:
    """Ops for one (old, new) ``AvroSerializer`` pair, mirroring ``_avro_resolve.Resolver`` (which has
    accepted the pair) branch by branch; ``kept`` ops read a writer value and write the reader's,
    ``skip`` ops only check a writer value."""

    def __init__(self, old: Any, new: Any) -> None:
        from ...serializers._avro_resolve import Resolver

        self.old = old
        self.new = new
        self.resolver = Resolver(old.root, new.root, old.codec, new.codec, tag_unions=True)
        self.rows: list[list[int]] = [[AVRO_OP_HEAD] + [0] * (PROGRAM_COLUMNS - 1)]
        self.paths: list[str] = [""]
        self.tail: list[int] = []
        self.consts = bytearray()
        self.scratch = 0
        self.growth = 0
        self.active: set[int] = set()
        self.first: dict[int, str] = {}
        _first_paths(old.root, old.codec.root_path, self.first)

    def node(self, op: int, emit: int, path: str, a: int = 0, b: int = 0) -> int:
        if len(self.rows) >= MAX_NODES:
            raise NotByteRemappable("the Avro schema expands to too many program nodes")
        self.rows.append([op, emit, a, b, 0, 0, -1, -1])
        self.paths.append(path)
        return len(self.rows) - 1

    def table(self, values: list[int]) -> int:
        at = len(self.tail)
        self.tail.extend(values)
        return at

    def const(self, raw: bytes) -> int:
        at = len(self.consts)
        self.consts += raw
        self.growth += len(raw)
        return at

    def enter(self, n: AvroNode) -> None:
        if isinstance(n, NamedNode):
            if id(n) in self.active:
                raise NotByteRemappable(f"recursive Avro type {n.fullname}")
            self.active.add(id(n))

    def leave(self, n: AvroNode) -> None:
        self.active.discard(id(n))

    # -- writer values that are only validated (removed fields, dropped subtrees) --------------
    def skip(self, w: AvroNode, cpath: str, epath: str) -> int:
        self.enter(w)
        try:
            return self._skip(w, cpath, epath)
        finally:
            self.leave(w)

    def _skip(self, w: AvroNode, cpath: str, epath: str) -> int:
        if isinstance(w, UnionNode):
            me = self.node(AVRO_OP_UNION, EMIT_SKIP, epath, len(w.branches))
            self.rows[me][COL_B] = self.table([self.skip(b, cpath, epath) for b in w.branches])
            return me
        if isinstance(w, RecordNode):
            cpath = self.first.get(id(w), cpath)
            me = self.node(AVRO_OP_RECORD, EMIT_SKIP, epath, len(w.fields))
            fields = [self.skip(f.type, f"{cpath}.{f.name}", f"{cpath}.{f.name}") for f in w.fields]
            self.rows[me][COL_B] = self.table(fields)
            return me
        if isinstance(w, (ArrayNode, MapNode)):
            return self.sequence(w, None, cpath, epath)
        return self.leaf(w, None, epath)

    # -- writer values resolved into reader values ----------------------------------------------
    def kept(self, w: AvroNode, r: AvroNode, cpath: str, epath: str) -> int:
        self.enter(w)
        try:
            return self._kept(w, r, cpath, epath)
        finally:
            self.leave(w)

    def _kept(self, w: AvroNode, r: AvroNode, cpath: str, epath: str) -> int:
        if isinstance(w, UnionNode):
            if not _branch_kept(w):
                raise NotByteRemappable(f"{epath}: union {w.label} has branches one value may fit")
            me = self.node(AVRO_OP_UNION, EMIT_TREE, epath, len(w.branches))
            before, grows, ops = self.growth, [], []
            for b in w.branches:
                ops.append(self.kept(b, r, cpath, epath))
                grows.append(self.growth - before)
                self.growth = before
            # one branch is written per value; a reader union index replaces the writer's
            self.growth += max(0, max(grows) - (4 if isinstance(r, UnionNode) else 0))
            self.rows[me][COL_B] = self.table(ops)
            return me
        if isinstance(r, UnionNode):
            index = self.resolver._best_branch(w, r, "", cpath)
            label = r.branches[index].label
            if self.new.codec.choose_branch(r, (label, None))[0] != index:
                raise NotByteRemappable(f"{epath}: union {r.label} names branch {label} ambiguously")
            me = self._kept(w, r.branches[index], cpath, epath)  # the same writer node: entered already
            self.rows[me][COL_UNION] = index
            self.growth += 4
            return me
        if isinstance(w, RecordNode) and isinstance(r, RecordNode):
            return self.record(w, r, cpath, epath)
        if isinstance(w, EnumNode) and isinstance(r, EnumNode):
            mapping = [r.index[s] if s in r.index else r.index[str(r.default)] for s in w.symbols]
            emit = EMIT_VALUE if mapping == list(range(len(mapping))) else EMIT_I32
            return self.node(AVRO_OP_ENUM, emit, epath, len(w.symbols), self.table(mapping))
        if isinstance(w, (ArrayNode, MapNode)) and type(r) is type(w):
            return self.sequence(w, r, cpath, epath)
        return self.leaf(w, r, epath)

    def sequence(self, w: ArrayNode | MapNode, r: AvroNode | None, cpath: str, epath: str) -> int:
        if isinstance(w, MapNode):
            me = self.node(AVRO_OP_MAP, EMIT_SKIP if r is None else EMIT_TREE, epath, 0, min_size(w.values) + 4)
            inner, rinner, sub = w.values, r.values if isinstance(r, MapNode) else None, "{}"
        else:
            me = self.node(AVRO_OP_ARRAY, EMIT_SKIP if r is None else EMIT_TREE, epath, 0, min_size(w.items))
            inner, rinner, sub = w.items, r.items if isinstance(r, ArrayNode) else None, "[]"
        child = self.skip(inner, cpath + sub, epath) if rinner is None else self.kept(inner, rinner, cpath + sub, epath)
        self.rows[me][COL_A] = child
        return me

    def leaf(self, w: AvroNode, r: AvroNode | None, epath: str) -> int:
        wl = logical_type(w)
        if wl is not None and wl.name == "uuid":
            raise NotByteRemappable(f"{epath}: uuid values are re-encoded by the reference")
        if r is not None:
            rl = logical_type(r)
            if wl is not None and wl.name == "decimal":
                raise NotByteRemappable(f"{epath}: decimal values are re-encoded by the reference")
            if rl is not None and (wl is None or wl.name != rl.name or w.kind != r.kind):
                raise NotByteRemappable(f"{epath}: reader logical type {rl.name} converts the writer's values")
        wk, rk = w.kind, (r.kind if r is not None else w.kind)
        lo, hi = _RANGES.get(wl.name, (LONG_MIN, LONG_MAX)) if wl is not None else (LONG_MIN, LONG_MAX)
        if wk == "null":
            return self.node(AVRO_OP_NULL, EMIT_VALUE if r is not None else EMIT_SKIP, epath)
        if wk == "boolean":
            return self.node(AVRO_OP_BOOL, EMIT_BOOL if r is not None else EMIT_SKIP, epath)
        if wk in _WIDTHS:
            if r is not None and wk != rk and (wk, rk) not in _PROMOTABLE:
                raise NotByteRemappable(f"{epath}: {wk} to {rk}")  # pragma: no cover - the resolver refused it
            op = {"int": AVRO_OP_INT, "long": AVRO_OP_LONG, "float": AVRO_OP_FLOAT, "double": AVRO_OP_DOUBLE}[wk]
            if r is not None:
                self.growth += _BYTES[_WIDTHS[rk]] - _BYTES[_WIDTHS[wk]]
            if wk == "int":
                lo, hi = max(lo, INT_MIN), min(hi, INT_MAX)
            emit = (EMIT_SKIP if r is None else EMIT_VALUE if wk == rk and op in (AVRO_OP_INT, AVRO_OP_LONG)
                    else _WIDTHS[rk])
            return self.node(op, emit, epath, lo, hi)
        if wk in ("string", "bytes"):
            emit = EMIT_SKIP if r is None else EMIT_UTF8 if (wk, rk) == ("bytes", "string") else EMIT_VALUE
            return self.node(AVRO_OP_BLOB, emit, epath, int(wk == "string"))
        if isinstance(w, FixedNode):
            return self.node(AVRO_OP_FIXED, EMIT_VALUE if r is not None else EMIT_SKIP, epath, w.size)
        if isinstance(w, EnumNode) and r is None:
            return self.node(AVRO_OP_ENUM, EMIT_SKIP, epath, len(w.symbols))
        raise NotByteRemappable(f"{epath}: {w.kind} to {rk}")  # pragma: no cover - the resolver refused it

    def record(self, w: RecordNode, r: RecordNode, cpath: str, epath: str) -> int:
        cpath = self.first.get(id(w), cpath)
        me = self.node(AVRO_OP_RECORD, EMIT_TREE, epath, len(w.fields))
        position = {f.name: j for j, f in enumerate(w.fields)}
        first: dict[int, int] = {}
        entries: list[int] = []
        order: list[int] = []
        for rf in r.fields:
            wf = w.fields_by_name.get(rf.name)
            if wf is None:
                wf = next((w.fields_by_name[a] for a in rf.aliases if a in w.fields_by_name), None)
            if wf is None:
                raw = self.default_bytes(rf, f"{cpath}.{rf.name}")
                entries += [-1, 0, self.const(raw), len(raw)]
                continue
            j = position[wf.name]
            fpath = f"{cpath}.{wf.name}"
            op = self.kept(wf.type, rf.type, fpath, fpath)
            first.setdefault(j, op)
            entries += [j, op, 0, 0]
            order.append(j)
        fields = [first[j] if j in first else self.skip(f.type, f"{cpath}.{f.name}", f"{cpath}.{f.name}")
                  for j, f in enumerate(w.fields)]
        row = self.rows[me]
        row[COL_B] = self.table(fields)
        row[COL_C] = len(r.fields)
        row[COL_D] = self.table(entries)
        if order != sorted(set(order)):
            row[COL_E] = self.scratch
            self.scratch += len(w.fields) + 1
        return me

    def default_bytes(self, rf: Any, fpath: str) -> bytes:
        """What the reference writes for a field the writer lacks: its default, encoded once."""
        from ...errors import SerializationError
        from ...io import DataOutputSerializer

        try:
            value = default_value(rf.type, rf.default)
            out = DataOutputSerializer()
            self.new.codec._writer(rf.type, fpath)(value, out)
        except (DefaultError, SerializationError) as e:
            raise NotByteRemappable(f"{fpath}: the default cannot be written ({e})") from None
        return out.get_copy_of_buffer()

    def program(self, root: int) -> RowProgram:
        n = len(self.rows)
        self.rows[0][COL_EMIT:COL_E + 1] = [ZERO_WIDTH_ITEM_BUDGET, n, root, self.scratch, self.growth, len(self.tail)]
        consts = bytes(self.consts) + b"\x00" * (-len(self.consts) % 8)
        tail = self.tail + np.frombuffer(consts, dtype="<i8").tolist()
        tail += [0] * (-len(tail) % PROGRAM_COLUMNS)
        matrix = np.array([v for row in self.rows for v in row] + tail, dtype=np.int64).reshape(-1, PROGRAM_COLUMNS)
        return RowProgram(matrix, self.paths, [])


def compile_avro_program(prior_snapshot: Any, new_serializer: Any) -> RowProgram:
    """Program for migrating Avro bytes written under ``prior_snapshot`` (an
    ``AvroSerializerSnapshot`` whose schema the new one reads after migration) to
    ``new_serializer`` (an ``AvroSerializer``); :class:`NotByteRemappable` when the per-value
    reference's output is not a function the ops express (module docstring)."""
    old = prior_snapshot.restore_serializer()
    c = _Compiler(old, new_serializer)
    try:
        root = c.kept(old.root, new_serializer.root, old.codec.root_path, old.codec.root_path)
    except RecursionError:
        raise NotByteRemappable("the Avro schemas are nested too deeply") from None
    return c.program(root)


def avro_growth(matrix: np.ndarray) -> int:
    """Bytes a migration adds to one entry outside arrays and maps (defaults, union indexes,
    widened numbers); with the input span it sizes the one-pass output, which grows if short."""
    return int(matrix[0, COL_D])
