"""Avro bulk migration: compiled kernel == Python twin == per-value reference, byte for byte.

Random record schemas evolve at random (the Avro generators of ``strategies``: fields added
with defaults, removed, reordered, renamed through aliases, promoted, made nullable, enums extended;
nested records, arrays, maps, unions, fixed, logical types; and ``evolved`` here, which changes
records at every depth, inside arrays, maps and unions). Every entry, including corrupted copies
(cut, flipped, inserted bytes: bad varints, union and enum indexes, lengths), must get the
reference's verdict, bytes and field path on both tiers; schema pairs the program cannot express
must keep the per-value path (and still give the reference's bytes).
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from strategies import AVRO_PRIMS, AVRO_PROMOTIONS
from strategies import avro_collect_named as _collect_named  # names the tests use (hypothesis seeds from their source)
from strategies import avro_define_before_use as _define_before_use
from strategies import avro_evolutions as evolutions
from strategies import avro_schema_and_value as schema_and_value
from strategies import avro_schemas as schemas
from strategies import avro_values as values
from strategies import corrupt as _corrupt
from tiers import on_tiers

from statemorph import bulk
from statemorph.errors import StateFormatError
from statemorph.io import DataInputDeserializer, DataOutputSerializer
from statemorph.kernels import plans
from statemorph.kernels.plans import compile_avro_program
from statemorph.serializers import AvroSerializer

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _reference(snap: Any, new: Any, blob: bytes | None) -> tuple[bytes | None, str | None]:
    """The per-value reference's bytes (None for a bad entry) and the Avro field path of its error."""
    if blob is None:
        return None, None
    prior = snap.restore_serializer()
    src, out = DataInputDeserializer(blob), DataOutputSerializer()
    try:
        snap.migrate_state(prior, new, src, out)
        src.expect_end("the value")
    except StateFormatError as e:
        return None, getattr(e, "avro_path", "")
    return out.get_copy_of_buffer(), None


def _migrates(snap: Any, new: Any) -> bool:
    """Whether the pair migrates (the new schema reads the old one); notes which path it takes."""
    if not snap.resolve_schema_compatibility(new).is_compatible_after_migration():
        return False
    try:
        compile_avro_program(snap, new)
        event("byte program")
    except plans.NotByteRemappable as e:
        event(f"per value: {str(e).partition(': ')[2][:40]}")
    return True


def _check(snap: Any, new: Any, blobs: list[bytes | None]) -> None:
    expected = [_reference(snap, new, b) for b in blobs]
    arr = pa.array(blobs, type=pa.binary())

    def collect() -> Any:
        out, errs = bulk.migrate(arr, snap, new, on_error="null")
        return out.to_pylist(), [(e.row, e.field_path, e.code) for e in errs]

    verdicts = on_tiers(collect)
    for tier, (got, errs) in verdicts.items():
        assert got == [b for b, _ in expected], tier
        bad = {row: path for row, (b, path) in enumerate(expected) if path is not None}
        assert {row for row, _, _ in errs} == set(bad), tier
        for row, path, code in errs:
            if code >= 0:  # a kernel error (-1: the entry went through the reference, whose error it is)
                assert path == bad[row], (tier, row, path, bad[row])
    assert len({repr(v) for v in verdicts.values()}) == 1, verdicts


@SETTINGS
@given(evolutions(), st.data())
def test_avro_migrate_equals_reference(case: Any, data: st.DataObject) -> None:
    old_schema, new_schema, _, _ = case
    old, new = AvroSerializer(old_schema), AvroSerializer(new_schema)
    snap = old.snapshot_configuration()
    if not _migrates(snap, new):
        return
    named: dict[str, Any] = {}
    _collect_named(old_schema, named)
    vals = data.draw(st.lists(st.one_of(st.none(), values(old_schema, named)), max_size=6))
    blobs = [None if v is None else old.to_bytes(v) for v in vals]
    _check(snap, new, blobs)
    _check(snap, new, [None if b is None else _corrupt(data.draw, b) for b in blobs])


@SETTINGS
@given(schema_and_value(), st.data())
def test_avro_identity_shaped_migrations_equal_reference(case: Any, data: st.DataObject) -> None:
    """A random schema wrapped in a record that gains a field: every kind of value is walked, copied
    canonically and re-emitted (arrays and maps as one block) by the program."""
    schema, value, _ = case
    old = AvroSerializer({"type": "record", "name": "Outer", "fields": [{"name": "v", "type": schema}]})
    new = AvroSerializer({"type": "record", "name": "Outer", "fields": [
        {"name": "added", "type": ["null", "string"], "default": None}, {"name": "v", "type": schema}]})
    snap = old.snapshot_configuration()
    blob = old.to_bytes({"v": value})
    _check(snap, new, [blob, None, _corrupt(data.draw, blob), _corrupt(data.draw, blob)])


_ADDED = [("int", 0), ("string", "x"), (["null", "long"], None), ({"type": "array", "items": "int"}, [1, 2]),
          ({"type": "map", "values": "double"}, {"k": 1.5}), ("boolean", True), ("bytes", "\u00ff")]


@st.composite
def evolved(draw: Any, s: Any) -> Any:
    """A reader schema for writer schema ``s``, changed at every depth: record fields removed,
    added with defaults, reordered and made nullable, primitives promoted, enums extended. Named
    types change where they are defined (references follow); unions keep their branches."""
    if isinstance(s, str):
        if s in AVRO_PROMOTIONS and draw(st.integers(0, 3)) == 0:
            return draw(st.sampled_from(AVRO_PROMOTIONS[s]))
        return s
    if isinstance(s, list) or s.get("logicalType") or s["type"] == "fixed":
        return s
    if s["type"] == "enum":
        return dict(s, symbols=s["symbols"] + ["Z"]) if draw(st.booleans()) and "Z" not in s["symbols"] else s
    if s["type"] in ("array", "map"):
        key = "items" if s["type"] == "array" else "values"
        return dict(s, **{key: draw(evolved(s[key]))})
    fields = []
    for f in s["fields"]:
        defines: dict[str, Any] = {}
        _collect_named(f["type"], defines)
        if not defines and draw(st.integers(0, 4)) == 0:
            continue  # removed
        t = draw(evolved(f["type"]))
        if isinstance(t, str) and t in AVRO_PRIMS and t != "null" and draw(st.integers(0, 4)) == 0:
            t = [t, "null"]
        fields.append(dict(f, type=t))
    for k in range(draw(st.integers(0, 2))):
        t, default = draw(st.sampled_from(_ADDED))
        fields.append({"name": f"{s['name']}_added{k}", "type": t, "default": default})
    return dict(s, fields=draw(st.permutations(fields)))


@SETTINGS
@given(st.data())
def test_avro_nested_evolutions_equal_reference(data: st.DataObject) -> None:
    state: dict[str, Any] = {"n": 0, "named": {}}
    fields = [{"name": f"f{i}", "type": data.draw(schemas(1, state))} for i in range(data.draw(st.integers(1, 3)))]
    old_schema = {"type": "record", "name": "Top", "fields": fields}
    new_top = data.draw(evolved(old_schema))
    new_schema = dict(new_top, fields=_define_before_use(new_top["fields"], state["named"]))
    old, new = AvroSerializer(old_schema), AvroSerializer(new_schema)
    snap = old.snapshot_configuration()
    if not _migrates(snap, new):
        return
    vals = data.draw(st.lists(values(old_schema, state["named"]), min_size=1, max_size=5))
    blobs: list[bytes | None] = [old.to_bytes(v) for v in vals]
    _check(snap, new, blobs + [None])
    _check(snap, new, [_corrupt(data.draw, b) for b in blobs if b is not None])
