"""Hypothesis strategies shared by several test subjects (one home, imported as ``strategies``).

Why one module: the logical-type generators and the byte corruptor were copied between test files,
and test files imported helpers from each other; every shared strategy lives here instead.
``tests/`` is the import root of the test helpers (``pythonpath`` in pyproject.toml): ``strategies``,
``tiers``, ``processes`` here, per-subject helpers as ``bulk.rows``, ``snapshots.specs`` and so on.
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
from typing import Any

from hypothesis import strategies as st

from statemorph.types import (
    MAX_LENGTH,
    TIMESTAMP_KINDS,
    ArrayType,
    BigIntType,
    BinaryType,
    BooleanType,
    CharType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntType,
    LocalZonedTimestampType,
    LogicalType,
    MapType,
    MultisetType,
    RowField,
    RowType,
    SmallIntType,
    TimestampType,
    TimeType,
    TinyIntType,
    VarBinaryType,
    VarCharType,
)

names = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=8)
descriptions = st.none() | st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=8)

atomic_types: st.SearchStrategy[LogicalType] = st.one_of(
    st.sampled_from([BooleanType(), TinyIntType(), SmallIntType(), IntType(), BigIntType(), FloatType(),
                     DoubleType(), DateType(), VarCharType(MAX_LENGTH), VarBinaryType(MAX_LENGTH)]),
    st.integers(1, 38).flatmap(lambda p: st.integers(0, p).map(lambda s: DecimalType(p, s))),
    st.builds(CharType, st.integers(1, 20)),
    st.builds(VarCharType, st.integers(1, 20)),
    st.builds(BinaryType, st.integers(1, 20)),
    st.builds(VarBinaryType, st.integers(1, 20)),
    st.builds(TimeType, st.integers(0, 9)),
    st.builds(TimestampType, st.integers(0, 9), kind=st.sampled_from(TIMESTAMP_KINDS)),
    st.builds(LocalZonedTimestampType, st.integers(0, 9), kind=st.sampled_from(TIMESTAMP_KINDS)),
)


def with_nullability(s: st.SearchStrategy[LogicalType]) -> st.SearchStrategy[LogicalType]:
    return st.tuples(s, st.booleans()).map(lambda tn: tn[0].copy(nullable=tn[1]))


def rows_of(children: st.SearchStrategy[LogicalType], max_fields: int = 4) -> st.SearchStrategy[RowType]:
    return st.lists(st.tuples(names, children, descriptions), max_size=max_fields,
                    unique_by=lambda f: f[0]).map(lambda fs: RowType(tuple(RowField(*f) for f in fs)))


def extend_types(children: st.SearchStrategy[LogicalType]) -> st.SearchStrategy[LogicalType]:
    return with_nullability(st.one_of(
        st.builds(ArrayType, children),
        st.builds(MultisetType, children),
        st.builds(MapType, children, children),
        rows_of(children),
    ))


logical_types: st.SearchStrategy[LogicalType] = st.recursive(
    with_nullability(atomic_types), extend_types, max_leaves=8
)
row_types: st.SearchStrategy[RowType] = rows_of(logical_types, max_fields=5)


def corrupt(draw: Any, blob: bytes) -> bytes:
    """Damage ``blob`` one to three times (cut, flip to an interesting byte, or insert bytes)."""
    b = bytearray(blob)
    for _ in range(draw(st.integers(1, 3))):
        how = draw(st.sampled_from(["cut", "flip", "insert"]))
        at = draw(st.integers(0, len(b)))
        if how == "cut":
            del b[at:]
        elif how == "flip" and at < len(b):
            b[at] = draw(st.sampled_from([0, 1, 2, 3, 4, 8, 0x7F, 0x80, 0xC1, 0xFF]))
        else:
            b[at:at] = draw(st.binary(min_size=1, max_size=2))
    return bytes(b)


# ---------------------------------------------------------------- rows over the types a kernel handles
field_names = st.integers(0, 10**6).map(lambda i: f"f{i}")


def row_types_over(leaves: list[Any]) -> st.SearchStrategy[RowType]:
    """Row types whose leaves are drawn from ``leaves`` (the types a kernel handles), rows nested
    inside, at most six fields a level; field names ``f<n>``."""
    leaf = st.sampled_from(leaves)

    def extend(children: st.SearchStrategy[LogicalType]) -> st.SearchStrategy[LogicalType]:
        return st.lists(st.tuples(field_names, children), min_size=1, max_size=4,
                        unique_by=lambda p: p[0]).map(lambda fs: RowType.of(*fs))

    inner = st.recursive(leaf, extend, max_leaves=8)
    return st.lists(st.tuples(field_names, inner), min_size=1, max_size=6, unique_by=lambda p: p[0]).map(
        lambda fs: RowType.of(*fs))


def values_for(t: LogicalType) -> st.SearchStrategy[Any]:
    """Python values of type ``t`` that Arrow can hold too (no NaN, dates and times in range)."""
    base: st.SearchStrategy[Any]
    if isinstance(t, BooleanType):
        base = st.booleans()
    elif isinstance(t, TinyIntType):
        base = st.integers(-128, 127)
    elif isinstance(t, SmallIntType):
        base = st.integers(-(1 << 15), (1 << 15) - 1)
    elif isinstance(t, IntType):
        base = st.integers(-(1 << 31), (1 << 31) - 1)
    elif isinstance(t, BigIntType):
        base = st.integers(-(1 << 63), (1 << 63) - 1)
    elif isinstance(t, FloatType):
        base = st.floats(width=32, allow_nan=False)
    elif isinstance(t, DoubleType):
        base = st.floats(allow_nan=False)
    elif isinstance(t, VarCharType):
        base = st.one_of(st.text(max_size=12), st.text(min_size=8, max_size=60), st.just("x" * 300))
    elif isinstance(t, VarBinaryType):
        base = st.binary(max_size=40)
    elif isinstance(t, DateType):
        base = st.dates(dt.date(1900, 1, 1), dt.date(2200, 1, 1))
    elif isinstance(t, TimeType):
        base = st.times().map(lambda v: v.replace(microsecond=v.microsecond // 1000 * 1000))
    elif isinstance(t, DecimalType):
        digits = t.precision
        base = st.integers(-(10**digits) + 1, 10**digits - 1).map(
            lambda u, s=t.scale: decimal.Decimal(u).scaleb(-s))
    elif isinstance(t, TimestampType):
        dts = st.datetimes(dt.datetime(1950, 1, 1), dt.datetime(2100, 1, 1))
        base = dts.map(lambda v: v.replace(microsecond=v.microsecond // 1000 * 1000)) if t.precision <= 3 else dts
    elif isinstance(t, ArrayType):
        base = st.lists(values_for(t.element_type), max_size=5)
    elif isinstance(t, MapType):
        base = st.dictionaries(values_for(t.key_type.copy(nullable=False)), values_for(t.value_type), max_size=4)
    elif isinstance(t, MultisetType):
        base = st.dictionaries(values_for(t.element_type.copy(nullable=False)), st.integers(0, (1 << 31) - 1),
                               max_size=4)
    elif isinstance(t, RowType):
        base = st.tuples(*[values_for(f.type) for f in t.fields])
    else:
        raise AssertionError(t)
    return st.one_of(st.none(), base) if t.nullable else base


@st.composite
def typed_rows(draw: Any, leaves: list[Any]) -> tuple[RowType, list[Any]]:
    """A row type over ``leaves`` and up to twelve rows of it (top-level nulls among them)."""
    t = draw(row_types_over(leaves))
    rows = draw(st.lists(st.one_of(st.none(), values_for(t).filter(lambda v: v is not None)), max_size=12))
    return t, rows


@st.composite
def evolve(draw: Any, t: RowType, leaves: list[Any]) -> RowType:
    """A compatible new schema: fields reordered, nullable fields added, nested rows evolved."""
    fields = []
    for f in t.fields:
        fields.append(RowField(f.name, draw(evolve_type(f.type, leaves))))
    fields = draw(st.permutations(fields))
    for k in range(draw(st.integers(0, 3))):
        pos = draw(st.integers(0, len(fields)))
        fields.insert(pos, RowField(f"added{k}", draw(st.sampled_from(leaves))))
    return RowType(tuple(fields))


@st.composite
def evolve_type(draw: Any, t: LogicalType, leaves: list[Any]) -> LogicalType:
    """Evolve the rows inside ``t`` (itself, array elements, map values) or keep it."""
    if isinstance(t, RowType) and draw(st.booleans()):
        return draw(evolve(t, leaves))
    if isinstance(t, ArrayType):
        return ArrayType(draw(evolve_type(t.element_type, leaves)), nullable=t.nullable)
    if isinstance(t, MapType):
        return MapType(t.key_type, draw(evolve_type(t.value_type, leaves)), nullable=t.nullable)
    return t


# ---------------------------------------------------------------- Avro schemas, values, evolutions
AVRO_PRIMS = ["null", "boolean", "int", "long", "float", "double", "string", "bytes"]
AVRO_LOGICAL = [
    {"type": "int", "logicalType": "date"},
    {"type": "long", "logicalType": "timestamp-millis"},
    {"type": "long", "logicalType": "timestamp-micros"},
    {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 3},
]


@st.composite
def avro_schemas(draw, depth=0, state=None):
    """A schema and, through ``state['named']``, the named types it defines (fresh names)."""
    state = state if state is not None else {"n": 0, "named": {}}
    kinds = AVRO_PRIMS + ["logical", "enum", "fixed", "ref"]
    if depth < 3:
        kinds += ["record", "record", "array", "map", "union"]
    kind = draw(st.sampled_from(kinds))

    def fresh(prefix):
        state["n"] += 1
        return f"{prefix}{state['n']}"

    if kind in AVRO_PRIMS:
        return kind
    if kind == "logical":
        return dict(draw(st.sampled_from(AVRO_LOGICAL)))
    if kind == "ref":
        done = sorted(state["named"])
        if not done:
            return "string"
        return draw(st.sampled_from(done))
    if kind == "enum":
        symbols = draw(st.lists(st.sampled_from(["A", "B", "C", "D", "E"]), min_size=1, max_size=4, unique=True))
        s = {"type": "enum", "name": fresh("E"), "symbols": symbols}
    elif kind == "fixed":
        s = {"type": "fixed", "name": fresh("F"), "size": draw(st.integers(0, 4))}
    elif kind == "array":
        return {"type": "array", "items": draw(avro_schemas(depth + 1, state))}
    elif kind == "map":
        return {"type": "map", "values": draw(avro_schemas(depth + 1, state))}
    elif kind == "union":
        branches = draw(st.lists(avro_schemas(depth + 1, state), min_size=1, max_size=4))
        seen, union = set(), []
        for b in branches:
            b = b if not isinstance(b, list) else b[0]
            key = _avro_branch_key(b, state["named"])
            if key not in seen:
                seen.add(key)
                union.append(b)
        return union
    else:
        name = fresh("R")
        n = draw(st.integers(0, 4))
        fields = [{"name": f"f{i}", "type": draw(avro_schemas(depth + 1, state))} for i in range(n)]
        s = {"type": "record", "name": name, "fields": fields}
    state["named"][s["name"]] = s
    return s


def _avro_branch_key(s, named):
    if isinstance(s, str):
        return s if s in AVRO_PRIMS else "named:" + s
    if s["type"] in ("record", "enum", "fixed"):
        return "named:" + s["name"]
    return s["type"]


def avro_resolve(s, named):
    """The definition of ``s`` where it names a type defined earlier, else ``s`` itself."""
    return named[s] if isinstance(s, str) and s not in AVRO_PRIMS else s


def avro_values(s, named, map_max=3):
    """A strategy of Python values (fastavro's mapping) that fit schema ``s``. Avro Java keeps maps in a
    HashMap, so its byte order of map entries differs from ours; the Java oracle uses ``map_max=1``."""
    s = avro_resolve(s, named)
    if isinstance(s, list):
        return st.one_of([avro_values(b, named, map_max) for b in s])
    t = s if isinstance(s, str) else s["type"]
    lt = None if isinstance(s, str) else s.get("logicalType")
    if lt == "date":
        return st.dates(min_value=dt.date(1, 1, 1))
    if lt in ("timestamp-millis", "timestamp-micros"):
        unit = 1000 if lt.endswith("millis") else 1
        return st.integers(-(10**11), 10**11).map(
            lambda n: dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc) + dt.timedelta(microseconds=n * unit))
    if lt == "decimal":
        return st.integers(-(10**9) + 1, 10**9 - 1).map(lambda n: decimal.Decimal(n).scaleb(-3))
    return {
        "null": lambda: st.none(),
        "boolean": lambda: st.booleans(),
        "int": lambda: st.integers(-(2**31), 2**31 - 1),
        "long": lambda: st.integers(-(2**63), 2**63 - 1),
        "float": lambda: st.floats(width=32, allow_nan=False),
        "double": lambda: st.floats(allow_nan=False),
        "string": lambda: st.text(max_size=6),
        "bytes": lambda: st.binary(max_size=6),
        "enum": lambda: st.sampled_from(s["symbols"]),
        "fixed": lambda: st.binary(min_size=s["size"], max_size=s["size"]),
        "array": lambda: st.lists(avro_values(s["items"], named, map_max), max_size=3),
        "map": lambda: st.dictionaries(st.text(max_size=3), avro_values(s["values"], named, map_max), max_size=map_max),
        "record": lambda: st.fixed_dictionaries({f["name"]: avro_values(f["type"], named, map_max)
                                                 for f in s["fields"]}),
    }[t]()


@st.composite
def avro_schema_and_value(draw, map_max=3):
    """(schema, a value of it, the named types it defines)."""
    state = {"n": 0, "named": {}}
    schema = draw(avro_schemas(0, state))
    value = draw(avro_values(schema, state["named"], map_max))
    return schema, value, state["named"]


AVRO_PROMOTIONS = {"int": ["long", "float", "double"], "long": ["float", "double"], "float": ["double"],
            "string": ["bytes"]}


@st.composite
def avro_evolutions(draw, map_max=3):
    """(old record schema, a compatible new one, a value of the old, the changes as ops: add, remove,
    promote, rename; the value changes are computed from the ops by the tests)."""
    state = {"n": 0, "named": {}}
    n = draw(st.integers(1, 5))
    fields = []
    for i in range(n):
        t = draw(st.one_of(st.sampled_from(["int", "long", "float", "string", "boolean", "double"]),
                           avro_schemas(1, state)))
        fields.append({"name": f"f{i}", "type": t})
    old = {"type": "record", "name": "Event", "fields": fields}
    named = state["named"]
    old_value = draw(avro_values(old, named, map_max))
    new_fields = json.loads(json.dumps(fields))
    ops = []  # (kind, args) applied to the value in the same order
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["add", "remove", "promote", "reorder", "rename", "nullable", "enum"]))
        if op == "add":
            name = f"added{len(new_fields)}_{len(ops)}"
            t, default = draw(st.sampled_from([("int", 0), ("string", "x"), (["null", "long"], None),
                                               ({"type": "array", "items": "int"}, [1, 2])]))
            new_fields.append({"name": name, "type": t, "default": default})
            ops.append(("add", name, default))
        elif op == "remove" and new_fields:
            i = draw(st.integers(0, len(new_fields) - 1))
            ops.append(("remove", new_fields.pop(i)["name"]))
        elif op == "promote":
            cands = [f for f in new_fields if isinstance(f["type"], str) and f["type"] in AVRO_PROMOTIONS]
            if cands:
                f = draw(st.sampled_from(cands))
                new_t = draw(st.sampled_from(AVRO_PROMOTIONS[f["type"]]))
                ops.append(("promote", f["name"], f["type"], new_t))
                f["type"] = new_t
        elif op == "reorder":
            new_fields = draw(st.permutations(new_fields))
        elif op == "rename" and new_fields:
            f = draw(st.sampled_from(new_fields))
            if "aliases" not in f:
                ops.append(("rename", f["name"], "renamed_" + f["name"]))
                f["aliases"] = [f["name"]]
                f["name"] = "renamed_" + f["name"]
        elif op == "nullable":
            cands = [f for f in new_fields if isinstance(f["type"], str) and f["type"] in AVRO_PRIMS
                     and f["type"] != "null"]
            if cands:
                f = draw(st.sampled_from(cands))
                f["type"] = ["null", f["type"]]
        elif op == "enum":
            for f in new_fields:
                t = avro_resolve(f["type"], named)
                if isinstance(f["type"], dict) and t.get("type") == "enum" and "Z" not in t["symbols"]:
                    t = dict(t, symbols=t["symbols"] + ["Z"])
                    f["type"] = t
                    break
    new = {"type": "record", "name": "Event", "fields": avro_define_before_use(new_fields, named)}
    return old, new, old_value, ops


def avro_collect_named(s, named):
    """Every named type (record, enum, fixed) defined inside schema ``s``, into ``named`` by name
    (the first definition of a name wins)."""
    if isinstance(s, list):
        for b in s:
            avro_collect_named(b, named)
    elif isinstance(s, dict):
        if s.get("type") in ("record", "enum", "fixed"):
            named.setdefault(s["name"], s)
        for f in s.get("fields", ()):
            avro_collect_named(f["type"], named)
        for key in ("items", "values"):
            if key in s:
                avro_collect_named(s[key], named)


def avro_define_before_use(fields, named):
    """After removing or reordering fields, a named type may be referenced before (or without) its
    definition; move each definition to the first use, as Avro requires."""
    defs = {}
    for f in fields:
        avro_collect_named(f["type"], defs)
    for name, definition in named.items():  # defined only in a field that was removed
        defs.setdefault(name, definition)
    done = set()

    def rewrite(t):
        if isinstance(t, list):
            return [rewrite(b) for b in t]
        if isinstance(t, str):
            if t in AVRO_PRIMS or t in done:
                return t
            t = defs[t]
        if t["type"] in ("record", "enum", "fixed"):
            if t["name"] in done:
                return t["name"]
            done.add(t["name"])
            if t["type"] == "record":
                return dict(t, fields=[dict(f, type=rewrite(f["type"])) for f in t["fields"]])
            return t
        key = "items" if t["type"] == "array" else "values" if t["type"] == "map" else None
        return dict(t, **{key: rewrite(t[key])}) if key else t

    return [dict(f, type=rewrite(f["type"])) for f in fields]
