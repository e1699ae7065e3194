"""Avro schema resolution: the writer (old) schema's values turned into reader (new) schema values.

The verdict (can the new schema read the old data at all?) comes from the official ``avro``
package's ``ReaderWriterCompatibilityChecker``, the Python port of the Avro Java check Flink calls.
Migrating values needs more than a verdict, so this module also compiles, once per (old, new)
pair, a tree of closures that applies the spec's resolution rules to a decoded old value: fields
matched by name or reader alias, defaults for added fields, removed fields dropped, promotions
int→long→float→double and string↔bytes, enum symbols re-mapped (unknown ones to the reader's enum
default), union branches re-resolved. When a rule fails, the error names the field path and the
rule, which is what the compatibility reason reports.
"""

from __future__ import annotations

import copy
import json
import math
import struct
import warnings
from collections.abc import Callable, Hashable, Mapping
from typing import Any

from ..errors import StateMigrationError
from ._avro_codec import AvroCodec
from ._avro_schema import ArrayNode, AvroNode, EnumNode, FixedNode, MapNode, NamedNode, RecordNode, UnionNode, memoized
from ._avro_values import DefaultError, default_value, logical_type

Transform = Callable[[Any], Any]

_F32 = struct.Struct(">f")


def _to_float32(v: Any) -> float:
    """Java's ``(float)`` cast: the promoted value is what a float field holds, not a double."""
    x = float(v)
    try:
        return float(_F32.unpack(_F32.pack(x))[0])
    except OverflowError:
        return math.copysign(math.inf, x)


_PROMOTIONS: dict[tuple[str, str], Transform] = {
    ("int", "long"): lambda v: v,
    ("int", "float"): _to_float32,
    ("int", "double"): float,
    ("long", "float"): _to_float32,
    ("long", "double"): float,
    ("float", "double"): lambda v: v,
    ("string", "bytes"): lambda v: v.encode("utf-8"),
    ("bytes", "string"): lambda v: bytes(v).decode("utf-8"),
}


class ResolutionError(Exception):
    """The reader schema cannot read what the writer schema wrote; ``reason`` names path and rule."""

    def __init__(self, context: str, rule: str, path: str) -> None:
        reason = f"{context}: {rule}" if context else rule
        if path and path not in context:
            reason += f" (at {path})"
        super().__init__(reason)
        self.reason = reason
        self.path = path
        self.rule = rule


def _identity(v: Any) -> Any:
    return v


def _names_match(reader: NamedNode, writer: NamedNode) -> bool:
    """Avro's ``schemaNameEquals``: same unqualified name, or the writer's full name is a reader alias."""
    return reader.name == writer.name or writer.fullname in reader.aliases


class Resolver:
    """Compiles the transform from ``writer`` values to ``reader`` values; raises ResolutionError."""

    def __init__(self, writer: AvroNode, reader: AvroNode, writer_codec: AvroCodec, reader_codec: AvroCodec,
                 tag_unions: bool) -> None:
        self.writer_codec = writer_codec
        self.reader_codec = reader_codec
        self.tag_unions = tag_unions
        self._memo: dict[Hashable, Transform] = {}
        self.changes: list[str] = []  # what the migration does, for the compatibility reason
        root = writer.label if isinstance(writer, NamedNode) else writer.kind
        if isinstance(reader, NamedNode):
            root = reader.name
        self.transform = self._resolve(writer, reader, "", root)

    def _resolve(self, w: AvroNode, r: AvroNode, context: str, path: str) -> Transform:
        if isinstance(w, NamedNode) and isinstance(r, NamedNode):
            return memoized(self._memo, (id(w), id(r)), lambda: self._make(w, r, context, path))
        return self._make(w, r, context, path)

    def _make(self, w: AvroNode, r: AvroNode, context: str, path: str) -> Transform:  # noqa: C901
        if isinstance(w, UnionNode):
            return self._from_union(w, r, context, path)
        if isinstance(r, UnionNode):
            return self._into_union(w, r, context, path)
        wk, rk = w.kind, r.kind
        if isinstance(r, RecordNode) and isinstance(w, RecordNode):
            self._check_name(r, w, context, path)
            return self._record(w, r, path)
        if isinstance(r, EnumNode) and isinstance(w, EnumNode):
            self._check_name(r, w, context, path)
            mapping = {s: s for s in w.symbols if s in r.index}
            missing = [s for s in w.symbols if s not in r.index]
            if missing:
                if r.default is None:
                    raise ResolutionError(context or f"enum {r.name}",
                                          f"writer symbols {missing} are missing from reader enum {r.fullname}, "
                                          f"which has no default", path)
                for s in missing:
                    mapping[s] = r.default
                self._note(f"{path}: enum symbols {missing} become {r.default!r}")
            if all(k == v for k, v in mapping.items()):
                return _identity

            def t_enum(v: Any) -> Any:
                try:
                    return mapping[v if isinstance(v, str) else getattr(v, "name", v)]
                except (KeyError, TypeError):
                    raise StateMigrationError(f"avro field {path}: {v!r} is not a symbol of writer enum "
                                              f"{w.fullname}") from None
            return t_enum
        if isinstance(r, FixedNode) and isinstance(w, FixedNode):
            self._check_name(r, w, context, path)
            if r.size != w.size:
                raise ResolutionError(context or f"fixed {r.name}",
                                      f"fixed size changed from {w.size} to {r.size}", path)
            return self._logical(w, r, None, path)
        if isinstance(r, ArrayNode) and isinstance(w, ArrayNode):
            item = self._resolve(w.items, r.items, context, path + "[]")
            if item is _identity:
                return _identity
            return lambda v: [item(x) for x in v]
        if isinstance(r, MapNode) and isinstance(w, MapNode):
            value = self._resolve(w.values, r.values, context, path + "{}")
            if value is _identity:
                return _identity
            return lambda v: {k: value(x) for k, x in v.items()}
        if wk == rk and wk in ("null", "boolean", "int", "long", "float", "double", "string", "bytes"):
            return self._logical(w, r, None, path)
        promote = _PROMOTIONS.get((wk, rk))
        if promote is not None:
            self._note(f"{path}: {wk} promoted to {rk}")
            return self._logical(w, r, promote, path)
        raise ResolutionError(context or path, f"reader type {self._type_label(r)} cannot read writer type "
                                               f"{self._type_label(w)}", path)

    def _note(self, change: str) -> None:
        if change not in self.changes:
            self.changes.append(change)

    @staticmethod
    def _type_label(n: AvroNode) -> str:
        if isinstance(n, NamedNode):
            return f"{n.kind} {n.fullname}"
        return n.label if n.logical is None else f"{n.kind} ({n.logical})"

    def _check_name(self, r: NamedNode, w: NamedNode, context: str, path: str) -> None:
        if not _names_match(r, w):
            raise ResolutionError(context or path, f"reader {r.kind} name {r.fullname} does not match writer "
                                                   f"{w.kind} name {w.fullname} (and is not a reader alias)", path)

    def _logical(self, w: AvroNode, r: AvroNode, promote: Transform | None, path: str) -> Transform:
        """Values go value → raw (writer logical type) → promoted raw → value (reader logical type)."""
        wl, rl = logical_type(w), logical_type(r)
        if promote is None or promote is _PROMOTIONS[("int", "long")] or promote is _PROMOTIONS[("float", "double")]:
            same = (wl is None and rl is None) or (
                wl is not None and rl is not None and wl.name == rl.name and w.kind == r.kind
                and w.props.get("scale") == r.props.get("scale"))
            if same:
                return _identity
        to_raw = wl.to_raw if wl is not None else _identity
        from_raw = rl.from_raw if rl is not None else _identity
        step = promote or _identity

        def t_primitive(v: Any) -> Any:
            try:
                return from_raw(step(to_raw(v)))
            except (ValueError, TypeError, OverflowError, ArithmeticError, AttributeError) as e:
                raise StateMigrationError(f"avro field {path}: cannot convert {v!r} from {self._type_label(w)} to "
                                          f"{self._type_label(r)}: {e}") from None
        return t_primitive

    def _record(self, w: RecordNode, r: RecordNode, path: str) -> Transform:
        plan: list[tuple[str, str | None, Transform, Any]] = []
        for rf in r.fields:
            context = f"record {r.name} field {rf.name}"
            fpath = f"{path}.{rf.name}"
            wf = w.fields_by_name.get(rf.name)
            if wf is None:
                wf = next((w.fields_by_name[a] for a in rf.aliases if a in w.fields_by_name), None)
            if wf is not None:
                if wf.name != rf.name:
                    self._note(f"{path}.{wf.name}: renamed to {rf.name}")
                plan.append((rf.name, wf.name, self._resolve(wf.type, rf.type, context, fpath), None))
                continue
            if not rf.has_default:
                raise ResolutionError(context, "reader field has no default and is missing in writer", fpath)
            try:
                dflt = default_value(rf.type, rf.default)
            except DefaultError as e:
                raise ResolutionError(context, f"reader field is missing in writer and its default is invalid: {e}",
                                      fpath) from None
            plan.append((rf.name, None, _identity, dflt))
            self._note(f"{fpath}: added with default {json.dumps(rf.default)}")
        used = {p[1] for p in plan}
        for wf in w.fields:
            if wf.name not in used:
                self._note(f"{path}.{wf.name}: removed")
        if [p[1] for p in plan if p[1] is not None] != [f.name for f in w.fields if f.name in used]:
            self._note(f"{path}: fields reordered")
        name = w.fullname

        def t_record(v: Any) -> dict[str, Any]:
            if not isinstance(v, Mapping):
                raise StateMigrationError(f"avro field {path}: expected a dict for record {name}, got "
                                          f"{type(v).__name__}")
            out: dict[str, Any] = {}
            for rname, wname, t, dflt in plan:
                if wname is None:
                    out[rname] = copy.deepcopy(dflt) if isinstance(dflt, (list, dict)) else dflt
                    continue
                try:
                    x = v[wname]
                except KeyError:
                    raise StateMigrationError(f"avro field {path}.{wname}: the old record has no value") from None
                out[rname] = t(x)
            return out
        return t_record

    def _from_union(self, w: UnionNode, r: AvroNode, context: str, path: str) -> Transform:
        per_branch: list[Transform] = []
        for b in w.branches:
            try:
                per_branch.append(self._resolve(b, r, context, path))
            except ResolutionError as e:
                raise ResolutionError(context or path, f"writer union branch {b.label} cannot be read: {e.rule}",
                                      e.path) from None
        choose = self.writer_codec._chooser(w, path)

        def t_from_union(v: Any) -> Any:
            try:
                i, x = choose(v)
            except Exception as e:  # the old value does not fit the old schema
                raise StateMigrationError(str(e)) from None
            return per_branch[i](x)
        return t_from_union

    def _into_union(self, w: AvroNode, r: UnionNode, context: str, path: str) -> Transform:
        index = self._best_branch(w, r, context, path)
        inner = self._resolve(w, r.branches[index], context, path)
        if not self.tag_unions:
            return inner
        choose = self.reader_codec._chooser(r, path)
        label = r.branches[index].label

        def t_into_union(v: Any) -> Any:
            x = inner(v)
            try:
                if choose(x)[0] == index:
                    return x
            except Exception:
                pass
            return (label, x)  # fastavro tuple notation keeps the branch Avro resolution chose
        return t_into_union

    def _best_branch(self, w: AvroNode, r: UnionNode, context: str, path: str) -> int:
        """Avro's ``bestBranch``: an exact match (same type, same name) first, else the first branch
        the writer type resolves to."""
        for i, b in enumerate(r.branches):
            if b.kind != w.kind:
                continue
            if isinstance(b, NamedNode) and isinstance(w, NamedNode):
                if b.fullname == w.fullname:
                    return i
            elif not isinstance(b, NamedNode):
                return i
        for i, b in enumerate(r.branches):
            if isinstance(b, NamedNode) and isinstance(w, NamedNode) and b.kind == w.kind and _names_match(b, w):
                return i
        for i, b in enumerate(r.branches):
            try:
                Resolver(w, b, self.writer_codec, self.reader_codec, False)
            except ResolutionError:
                continue
            return i
        raise ResolutionError(context or path, f"reader union {r.label} has no branch for writer type "
                                               f"{self._type_label(w)}", path)


# -- the official checker ----------------------------------------------------------------------------

def avro_checker_verdict(reader_parsed: Any, writer_parsed: Any) -> tuple[bool, str] | None:
    """(compatible, message) from ``avro.compatibility.ReaderWriterCompatibilityChecker``, or None
    when the ``avro`` package is not installed or cannot load a schema fastavro accepted; the caller
    then relies on :class:`Resolver`, which applies the same rules."""
    try:  # the optional ``avro`` package: imported only where its checker is asked
        import avro.schema
        from avro.compatibility import ReaderWriterCompatibilityChecker, SchemaCompatibilityType
    except ImportError:
        return None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # avro warns about logical types it ignores
            reader = avro.schema.parse(json.dumps(_for_avro(reader_parsed)))
            writer = avro.schema.parse(json.dumps(_for_avro(writer_parsed)))
        result = ReaderWriterCompatibilityChecker().get_compatibility(reader, writer)  # type: ignore[no-untyped-call]
    except Exception:  # the avro package is stricter than fastavro on a few schemas
        return None
    if result.compatibility is SchemaCompatibilityType.compatible:
        return True, ""
    messages = "; ".join(sorted(result.messages))
    locations = ", ".join(sorted(result.locations))
    return False, f"{messages} at {locations}" if messages else f"incompatible at {locations}"


def _for_avro(s: Any) -> Any:
    """fastavro's parsed form for the ``avro`` package: full names everywhere and named-type aliases
    qualified, because the Python checker compares aliases to full names as given."""
    if isinstance(s, list):
        return [_for_avro(x) for x in s]
    if not isinstance(s, Mapping):
        return s
    out = {k: _for_avro(v) for k, v in s.items() if not k.startswith("__")}
    if out.get("type") in ("record", "error", "enum", "fixed") and out.get("aliases"):
        space = str(out["name"]).rpartition(".")[0]
        out["aliases"] = [a if "." in a or not space else f"{space}.{a}" for a in out["aliases"]]
    return out


__all__ = ["ResolutionError", "Resolver", "avro_checker_verdict"]
