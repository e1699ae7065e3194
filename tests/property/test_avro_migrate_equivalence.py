"""Avro bulk migration: compiled kernel == Python twin == per-value reference, byte for byte.

Random record schemas evolve at random (the generators of ``test_avro_properties``: fields added
with defaults, removed, reordered, renamed through aliases, promoted, made nullable, enums extended;
nested records, arrays, maps, unions, fixed, logical types). Every entry, including corrupted copies
(cut, flipped, inserted bytes: bad varints, union and enum indexes, lengths), must get the
reference's verdict, bytes and field path on both tiers; schema pairs the program cannot express
must keep the per-value path (and still give the reference's bytes).
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from test_avro_properties import evolutions, schema_and_value, values
from test_pojo_migrate_equivalence import _corrupt, _on_tiers

from statemorph import arrow
from statemorph.errors import StateFormatError
from statemorph.io import DataInputDeserializer, DataOutputSerializer
from statemorph.serializers import AvroSerializer
from statemorph.serializers import _batch as B
from statemorph.serializers._batch_avro import compile_avro_program

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


def _check(snap: Any, new: Any, blobs: list[bytes | None]) -> None:
    expected = [_reference(snap, new, b) for b in blobs]
    arr = pa.array(blobs, type=pa.binary())

    def collect() -> Any:
        out, errs = arrow.migrate(arr, snap, new, on_error="collect")
        return out.to_pylist(), [(e.row, e.field_path, e.code) for e in errs]

    verdicts = _on_tiers(collect)
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
    if not snap.resolve_schema_compatibility(new).is_compatible_after_migration():
        return
    try:
        compile_avro_program(snap, new)
        event("byte program")
    except B.NotByteRemappable as e:
        event(f"per value: {str(e).partition(': ')[2][:40]}")
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


def _collect_named(s: Any, named: dict[str, Any]) -> None:
    if isinstance(s, list):
        for b in s:
            _collect_named(b, named)
    elif isinstance(s, dict):
        if s.get("type") in ("record", "enum", "fixed"):
            named.setdefault(s["name"], s)
        for f in s.get("fields", ()):
            _collect_named(f["type"], named)
        for key in ("items", "values"):
            if key in s:
                _collect_named(s[key], named)
