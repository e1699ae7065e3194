"""Schema files: TOML → new state types → serializers and descriptors."""

from __future__ import annotations

import pyarrow as pa
import pytest

from statemorph import serializers as S
from statemorph.savepoint import SavepointWriter, read_metadata
from statemorph.schema_file import (
    SchemaFileError,
    describe_serializer,
    descriptors_for_savepoint,
    load_schema,
    parse_schema,
    serializer_for,
)
from statemorph.state.descriptors import ListStateDescriptor, MapStateDescriptor, ValueStateDescriptor
from statemorph.types import RowType, parse_type

EVENTS = "ROW<eventId BIGINT, metadata ROW<userId INT, `timestamp` BIGINT, deviceType STRING>>"


def test_parse_minimal_file():
    sf = parse_schema(f'[states.events]\ntype = """{EVENTS}"""\n', "new.toml")
    st = sf.states["events"]
    assert st.type == parse_type(EVENTS)
    assert st.kind is None and st.serializer == "auto" and st.user_key_type is None
    assert "events" in sf and "other" not in sf


def test_parse_all_keys():
    sf = parse_schema(
        'format = 1\n[states.m]\nkind = "map"\ntype = "BIGINT"\nuser_key_type = "STRING"\nserializer = "datastream"\n'
    )
    st = sf.states["m"]
    assert st.kind == "map" and st.serializer == "datastream"
    assert str(st.user_key_type) == "STRING" and str(st.type) == "BIGINT"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[states.a\n", "not valid TOML"),
        ("[states.a]\ntype = \"RAW('a.B')\"\n", "goes with a RAW('<class>') type"),
        ("[states.a]\ntype = 'INT'\nserializer = 'opaque'\n", "goes with a RAW('<class>') type"),
        ("[states.a]\ntype = 'INT'\nserializer = 'tuple'\n", "needs a ROW type"),
        ("wat = 1\n[states.a]\ntype='INT'\n", "unknown top-level key(s) wat"),
        ("format = 2\n[states.a]\ntype='INT'\n", "format 2 is not supported"),
        ("[states.a]\ntyp = 'INT'\n", "unknown key(s) typ"),
        ("[states.a]\nkind = 'value'\n", "missing 'type'"),
        ("[states.a]\ntype = 'INT'\nkind = 'set'\n", "kind must be one of"),
        ("[states.a]\ntype = 'INT'\nserializer = 'kryo'\n", "serializer must be one of"),
        ("[states.a]\ntype = 'ROW<a INT'\n", "type does not parse"),
        ("[states.a]\ntype = 3\n", "must be a string"),
        ("[states.a]\ntype = 'INT'\nserializer = 'rowdata'\n", "needs a ROW type"),
        ("[states.a]\nserializer = 'avro'\n", "needs avro_schema"),
        ("[states.a]\nserializer = 'avro'\navro_schema = '{nope'\n", "avro_schema is not JSON"),
        ("[states.a]\ntype = 'INT'\navro_schema = '{}'\n", "only allowed with serializer"),
        ("[states.a]\ntype = 'INT'\nkind = 'value'\nuser_key_type = 'INT'\n", "only meaningful for map"),
    ],
)
def test_errors_name_the_file_and_the_problem(text, message):
    with pytest.raises(SchemaFileError) as e:
        parse_schema(text, "new.toml")
    assert message in str(e.value)
    assert "new.toml" in str(e.value)


def test_a_file_naming_no_state_is_a_plain_rewrite():
    """Before: "no states" (exit 2); a plain rewrite (carry a savepoint unchanged) was impossible."""
    for text in ("", "format = 1\n", "[states]\n", "[operators]\n"):
        sf = parse_schema(text, "empty.toml")
        assert not sf.states and not sf.operators


def test_type_error_points_at_position():
    with pytest.raises(SchemaFileError) as e:
        parse_schema("[states.a]\ntype = 'ROW<a INTEGR>'\n", "s.toml")
    assert "[states.a]" in str(e.value) and "^" in str(e.value)


def test_load_schema_missing_file(tmp_path):
    with pytest.raises(SchemaFileError, match="cannot read schema file"):
        load_schema(tmp_path / "nope.toml")
    p = tmp_path / "s.toml"
    p.write_text(f"[states.e]\ntype = '''{EVENTS}'''\n", encoding="utf-8")
    assert load_schema(p).source == str(p)


@pytest.mark.parametrize(
    ("type_text", "expected"),
    [
        ("BOOLEAN", S.BooleanSerializer()), ("TINYINT", S.ByteSerializer()), ("SMALLINT", S.ShortSerializer()),
        ("INT", S.IntSerializer()), ("BIGINT", S.LongSerializer()), ("FLOAT", S.FloatSerializer()),
        ("DOUBLE", S.DoubleSerializer()), ("STRING", S.StringSerializer()), ("CHAR(1)", S.CharSerializer()),
        ("BYTES", S.BytePrimitiveArraySerializer()), ("ARRAY<INT>", S.ListSerializer(S.IntSerializer())),
        ("MAP<STRING, BIGINT>", S.MapSerializer(S.StringSerializer(), S.LongSerializer())),
    ],
)
def test_datastream_family(type_text, expected):
    sf = parse_schema(f"[states.a]\ntype = '{type_text}'\nserializer = 'datastream'\n")
    assert serializer_for(sf.states["a"]) == expected


def test_auto_family_follows_the_prior_serializer():
    st = parse_schema("[states.a]\ntype = 'ROW<a INT, b STRING>'\n").states["a"]
    assert isinstance(serializer_for(st), S.RowDataSerializer)  # no savepoint: ROW means RowData
    assert isinstance(serializer_for(st, S.RowDataSerializer("ROW<a INT>")), S.RowDataSerializer)
    row = serializer_for(st, S.RowSerializer([S.IntSerializer()]))
    assert isinstance(row, S.RowSerializer) and row.field_names == ("a", "b")
    assert serializer_for(st, S.IntSerializer()) == S.RowSerializer(
        [S.IntSerializer(), S.StringSerializer()], field_names=["a", "b"])


def test_types_without_datastream_serializer_are_explained():
    st = parse_schema("[states.a]\ntype = 'DECIMAL(10, 2)'\nserializer = 'datastream'\n").states["a"]
    with pytest.raises(SchemaFileError, match="has no DataStream serializer"):
        serializer_for(st)


def test_describe_serializer_prints_flink_sql():
    assert describe_serializer(S.RowDataSerializer(EVENTS)) == str(parse_type(EVENTS))
    assert describe_serializer(S.ListSerializer(S.LongSerializer())) == "ARRAY<BIGINT>"
    assert describe_serializer(S.MapSerializer(S.StringSerializer(), S.IntSerializer())) == "MAP<STRING, INT>"
    assert describe_serializer(S.RowSerializer([S.IntSerializer()], field_names=["x"])) == "ROW<`x` INT>"


def _savepoint(path):
    ks = S.LongSerializer()
    empty = {"key_group": pa.array([], pa.int32()), "key": pa.array([], pa.binary()),
             "namespace": pa.array([], pa.binary()), "value": pa.array([], pa.binary())}
    with SavepointWriter(path, max_parallelism=128, key_serializer=ks) as w:
        w.write_state("events", "value", pa.table(empty), value_serializer=S.RowDataSerializer(EVENTS))
        w.write_state("rows", "list", pa.table({**empty, "index": pa.array([], pa.int32())}),
                      value_serializer=S.RowSerializer([S.IntSerializer()], field_names=["n"]))
        w.write_state("counts", "map", pa.table({**empty, "user_key": pa.array([], pa.binary())}),
                      value_serializer=S.IntSerializer(), user_key_serializer=S.StringSerializer())
    return read_metadata(path)


def test_descriptors_for_savepoint(tmp_path):
    md = _savepoint(tmp_path / "sp")
    sf = parse_schema(
        "[states.events]\ntype = 'ROW<eventId BIGINT>'\n"
        "[states.rows]\ntype = 'ROW<n INT, m STRING>'\n"
        "[states.counts]\ntype = 'INT'\n")
    d = {x.name: x for x in descriptors_for_savepoint(sf, md)}
    assert isinstance(d["events"], ValueStateDescriptor)
    assert isinstance(d["events"].value_serializer, S.RowDataSerializer)
    assert isinstance(d["rows"], ListStateDescriptor)
    assert isinstance(d["rows"].value_serializer, S.RowSerializer)
    assert isinstance(d["counts"], MapStateDescriptor)
    assert d["counts"].key_serializer == S.StringSerializer()  # unchanged map key from the savepoint


def test_descriptors_for_unknown_state_lists_the_states(tmp_path):
    md = _savepoint(tmp_path / "sp")
    with pytest.raises(SchemaFileError, match=r"states.evnets.*states: 'events', 'rows', 'counts'"):
        descriptors_for_savepoint(parse_schema("[states.evnets]\ntype = 'INT'\n"), md)


def test_row_type_is_kept_exactly():
    st = parse_schema(f"[states.e]\ntype = '''{EVENTS}'''\n").states["e"]
    assert isinstance(st.type, RowType)
    assert serializer_for(st).row_type == parse_type(EVENTS)


def test_parse_operator_states():
    sf = parse_schema(
        f'[operators.events-state.states.events]\ntype = """{EVENTS}"""\n'
        '[operators.1d688a8c0c78555ff37bf9598bbe711c.states.count]\ntype = "BIGINT"\nserializer = "datastream"\n',
        "flink.toml",
    )
    assert not sf.states
    assert set(sf.operators) == {"events-state", "1d688a8c0c78555ff37bf9598bbe711c"}
    assert sf.operators["events-state"]["events"].type == parse_type(EVENTS)
    assert str(sf.operators["1d688a8c0c78555ff37bf9598bbe711c"]["count"].type) == "BIGINT"


@pytest.mark.parametrize("text, message", [
    ('operators = 3\n', "operators must be a table"),
    ('[operators.op]\ntype = "INT"\n', "[operators.op] must hold only [operators.op.states.<name>] tables"),
    ('[operators.op.states.s]\ntype = "INT"\nbogus = 1\n', "[operators.op.states.s]: unknown key(s) bogus"),
    ('[operators.op.states.s]\nkind = "value"\n', "[operators.op.states.s]: missing 'type'"),
])
def test_operator_states_errors_name_the_table(text, message):
    with pytest.raises(SchemaFileError) as e:
        parse_schema(text, "flink.toml")
    assert message in str(e.value)
