"""Schema files for POJO state (``serializer = "pojo"``): parsing, the PojoSerializer built against
the savepoint's (class name, declaring classes, Java defaults of added fields), and the migration
it drives through the POJO byte-remap kernel on both tiers, equal to the per-value reference."""

from __future__ import annotations

import pyarrow as pa
import pytest
from tiers import on_tiers

from statemorph import arrow
from statemorph import serializers as S
from statemorph.bulk.capabilities import remap_program
from statemorph.migration import migrate_bytes
from statemorph.schema_file import SchemaFileError, parse_schema, serializer_for
from statemorph.serializers.pojo import PojoField, PojoSerializer
from statemorph.typeutils import describe_serializer, read_versioned_snapshot, write_versioned_snapshot

CLASS = "com.acme.Profile"
V2 = "ROW<id BIGINT NOT NULL, name STRING, `count` INT NOT NULL, score DOUBLE NOT NULL>"


def _v1(declaring: str = CLASS) -> PojoSerializer:
    """The version-1 serializer as a snapshot read from a savepoint restores it (dicts, no class)."""
    old = PojoSerializer.from_fields(
        None,
        CLASS,
        [
            PojoField("count", S.IntSerializer(), CLASS),
            PojoField("id", S.LongSerializer(), declaring),
            PojoField("name", S.StringSerializer(), CLASS),
        ],
    )
    snap = read_versioned_snapshot(write_versioned_snapshot(old.snapshot_configuration()))
    restored: PojoSerializer = snap.restore_serializer()
    return restored


def _state(body: str):
    return parse_schema(f"[states.p]\n{body}\n", "new.toml").states["p"]


def test_pojo_serializer_takes_class_and_declaring_classes_from_the_savepoint():
    new = serializer_for(_state(f'serializer = "pojo"\ntype = "{V2}"'), _v1(declaring="com.acme.Base"))
    assert isinstance(new, PojoSerializer) and new.pojo_class is None
    assert new.java_class_name == CLASS
    assert new.field_names == ["count", "id", "name", "score"]  # Java String order, as PojoTypeInfo sorts
    assert {f.name: f.declaring_class for f in new.fields} == {
        "count": CLASS,
        "id": "com.acme.Base",
        "name": CLASS,
        "score": CLASS,
    }
    assert new.field_serializers == {
        "count": S.IntSerializer(),
        "id": S.LongSerializer(),
        "name": S.StringSerializer(),
        "score": S.DoubleSerializer(),
    }
    # NOT NULL = a Java primitive: an added one holds what the no-arg constructor leaves, a nullable one null
    assert [new.default_value(n) for n in new.field_names] == [0, 0, None, 0.0]


def test_auto_keeps_a_pojo_a_pojo():
    new = serializer_for(_state(f'type = "{V2}"'), _v1())
    assert isinstance(new, PojoSerializer) and new.java_class_name == CLASS


def test_pojo_class_and_defaults():
    st = _state(f'serializer = "pojo"\ntype = "{V2}"\npojo_class = "com.acme.Other"\ndefaults = {{ score = 1 }}')
    new = serializer_for(st, _v1())
    assert new.java_class_name == "com.acme.Other"
    assert {f.declaring_class for f in new.fields} == {"com.acme.Other"}  # another class declares its own fields
    assert new.default_value("score") == 1.0 and isinstance(new.default_value("score"), float)
    compat = _v1().snapshot_configuration().resolve_schema_compatibility(new)
    assert compat.is_incompatible() and "POJO class changed" in compat.reason
    with pytest.raises(SchemaFileError, match="needs its Java class: set pojo_class"):
        serializer_for(_state(f'serializer = "pojo"\ntype = "{V2}"'))  # no savepoint to take it from
    assert (
        serializer_for(_state(f'serializer = "pojo"\ntype = "{V2}"\npojo_class = "{CLASS}"')).java_class_name == CLASS
    )


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ('serializer = "pojo"\ntype = "BIGINT"', "needs a ROW type of the class's fields"),
        ('type = "ROW<a INT>"\npojo_class = "x.Y"', "pojo_class only go with serializer"),
        ('type = "ROW<a INT>"\ndefaults = { a = 1 }', "defaults only go with serializer"),
        ('serializer = "pojo"\ntype = "ROW<a INT>"\npojo_class = 3', "pojo_class must be a Java class name"),
        ('serializer = "pojo"\ntype = "ROW<a INT>"\ndefaults = 3', "defaults must be a table"),
        (
            'serializer = "pojo"\ntype = "ROW<a INT>"\ndefaults = { b = 1 }',
            r"names field\(s\) b the type does not have",
        ),
        (
            'serializer = "pojo"\ntype = "ROW<a INT>"\ndefaults = { a = "x" }',
            "defaults.a = 'x' is not a value of type INT",
        ),
        ('serializer = "pojo"\ntype = "ROW<a INT>"\ndefaults = { a = 3000000000 }', "is not a value of type INT"),
        ('serializer = "pojo"\ntype = "ROW<a INT>"\ndefaults = { a = true }', "is not a value of type INT"),
        ('serializer = "pojo"\ntype = "ROW<a INT>"\ndefaults = { a = [1] }', "is not a value of type INT"),
        ('serializer = "pojo"\ntype = "ROW<s STRING NOT NULL>"', "no Java primitive holds: .* give it in defaults"),
    ],
)
def test_bad_pojo_states_are_explained(body, message):
    with pytest.raises(SchemaFileError, match=message):
        _state(body)


def test_a_non_primitive_not_null_field_with_a_default():
    new = serializer_for(
        _state('serializer = "pojo"\ntype = "ROW<s STRING NOT NULL, c CHAR(1) NOT NULL>"\ndefaults = { s = "n/a" }'),
        _v1(),
    )
    assert new.default_value("s") == "n/a" and new.default_value("c") == "\0"


def test_describe_shows_the_row_a_schema_file_gives():
    assert describe_serializer(_v1()) == f"POJO {CLASS} ROW<`count` INT, `id` BIGINT, `name` STRING>"


def test_the_added_field_migrates_through_the_pojo_kernel_as_the_reference_does():
    old = _v1()
    prior = read_versioned_snapshot(write_versioned_snapshot(old.snapshot_configuration()))
    values = [{"id": 7, "name": "nöme-7", "count": 3}, {"id": -1, "name": None, "count": 0}, None]
    blobs = [None if v is None else old.to_bytes(v) for v in values]
    for body, score in (
        (f'serializer = "pojo"\ntype = "{V2}"', 0.0),
        (f'serializer = "pojo"\ntype = "{V2}"\ndefaults = {{ score = 1.5 }}', 1.5),
    ):
        new = serializer_for(_state(body), old)
        compat = prior.resolve_schema_compatibility(new)
        assert compat.is_compatible_after_migration() and compat.reason == "fields added: score"
        assert remap_program(prior, new, compat)[1] == "pojo"  # the byte-remap kernel, not per value
        want = [None if b is None else migrate_bytes(prior, new, b) for b in blobs]
        for got in on_tiers(
            lambda new=new: arrow.migrate(pa.array(blobs, pa.binary()), prior, new).to_pylist()
        ).values():
            assert got == want
        assert [None if b is None else new.from_bytes(b) for b in want] == [
            {"count": 3, "id": 7, "name": "nöme-7", "score": score},
            {"count": 0, "id": -1, "name": None, "score": score},
            None,
        ]
