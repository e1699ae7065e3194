"""Tests for the golden-vector reader itself (tests/snapshots/specs.py): the SPEC grammar, the value
tags and the comparison. A bug here would make test_golden.py pass or fail for the wrong reason."""

from __future__ import annotations

import datetime as dt
import decimal
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st
from snapshots.specs import ATOMS, Spec, SpecError, World, mismatch, parse_spec, without_classes

from statemorph.row import Row, RowKind
from statemorph.types import Timestamp

NAMES = st.from_regex(r"[a-z][a-zA-Z0-9_]{0,6}", fullmatch=True)
CLASSES = st.from_regex(r"p\.[A-Z][a-z]{0,5}", fullmatch=True)


def _specs() -> st.SearchStrategy[Spec]:
    atoms = st.sampled_from(sorted(ATOMS)).map(Spec)
    enums = st.builds(
        lambda c, k: Spec("Enum", cls=c, consts=k), CLASSES, st.lists(NAMES, min_size=1, max_size=4, unique=True)
    )
    rowdata = st.sampled_from(["ROW<a INT>", "ROW<`x>y` MAP<STRING, ARRAY<INT>>, b STRING 'c>d'>"]).map(
        lambda t: Spec("RowData", raw=t)
    )
    avro = st.sampled_from(['"string"', '{"type":"array","items":"long"}']).map(lambda t: Spec("Avro", raw=t))

    def extend(inner: st.SearchStrategy[Spec]) -> st.SearchStrategy[Spec]:
        return st.one_of(
            inner.map(lambda a: Spec("List", [a])),
            st.tuples(inner, inner).map(lambda kv: Spec("Map", list(kv))),
            st.tuples(inner, st.booleans()).map(lambda a: Spec("Nullable", [a[0]], padded=a[1])),
            st.lists(inner, min_size=1, max_size=4).map(lambda a: Spec("Tuple", a)),
            st.tuples(st.lists(inner, max_size=4), st.booleans()).map(lambda a: Spec("Row", a[0], legacy=a[1])),
            st.tuples(CLASSES, st.dictionaries(NAMES, inner, max_size=3)).map(
                lambda a: Spec("Pojo", list(a[1].values()), cls=a[0], field_names=list(a[1]))
            ),
        )

    return st.recursive(st.one_of(atoms, enums, rowdata, avro), extend, max_leaves=8)


@given(_specs())
def test_spec_text_round_trips(spec: Spec) -> None:
    text = str(spec)
    assert parse_spec(text) == spec
    spaced = text.replace(",", " , ").replace("<", "< ") if "RowData" not in text and "Avro" not in text else text
    assert parse_spec(spaced) == spec


@pytest.mark.parametrize(
    "bad",
    [
        "",
        "Int<",
        "List<Int",
        "List<>",
        "Map<Int>",
        "Nullable<Int,pad>",
        "Tuple[legacy]<Int>",
        "Foo",
        "Int Int",
        "Tuple<>",
        "Enum<p.C>",
        "Pojo<p.P:a>",
        "RowData<ROW<a INT>",
        'Avro<{"type":>',
    ],
)
def test_bad_specs_are_rejected(bad: str) -> None:
    with pytest.raises(SpecError):
        parse_spec(bad)


def test_tagged_values_decode_under_their_spec() -> None:
    w = World()
    assert str(w.value("Double", {"$f": "-0.0"})) == "-0.0"
    assert w.value("String", {"$s": [0x61, 0xD800]}) == "a\ud800"
    assert w.value("String", {"$s": [0xD83D, 0xDE00]}) == "\U0001f600"  # valid pairs combine
    assert w.value("Bytes", {"$b": "00ff"}) == b"\x00\xff"
    assert list(w.value("Map<Int,String>", {"$map": [[2, "b"], [1, None]]}).items()) == [(2, "b"), (1, None)]
    r = w.value("Row<Int,String>", {"$row": [1, None], "kind": "-U"})
    assert r == (1, None) and r.kind is RowKind.UPDATE_BEFORE
    color = w.value("Enum<p.Color:RED,GREEN>", "GREEN")
    assert color.name == "GREEN" and type(color) is w.enums["p.Color"]
    pojo = w.value("Pojo<p.P:b=Int,a=String>", {"a": "x"})
    assert (pojo.a, pojo.b) == ("x", None) and type(pojo) is w.pojos["p.P"]
    row = w.value(
        "RowData<ROW<d DECIMAL(5,2), t TIME(3), dt DATE, ts TIMESTAMP(6), l TIMESTAMP_LTZ(3), n TIMESTAMP(9)>>",
        {
            "$row": [
                {"$dec": "1.50"},
                {"$time": "01:02:03.004"},
                {"$date": "2024-02-29"},
                {"$ts": [1000, 2000]},
                {"$ts": [0, 0]},
                {"$ts": [1, 5]},
            ]
        },
    )
    assert row == (
        decimal.Decimal("1.50"),
        dt.time(1, 2, 3, 4000),
        dt.date(2024, 2, 29),
        dt.datetime(1970, 1, 1, 0, 0, 1, 2),
        dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc),
        Timestamp(1, 5),
    )
    avro = '{"type":"record","name":"R","fields":[{"name":"u","type":["null","long",{"type":"map","values":"int"}]}]}'
    assert w.value(f"Avro<{avro}>", {"u": 3}) == {"u": 3}
    assert w.value(f"Avro<{avro}>", {"u": {"$map": [["k", 1]]}}) == {"u": {"k": 1}}


def test_values_that_break_the_spec_are_rejected() -> None:
    w = World()
    for spec, value in [
        ("Int", True),
        ("Int", 1.5),
        ("Boolean", 1),
        ("Tuple<Int,Int>", [1]),
        ("Row<Int>", {"$row": [1], "kind": "?"}),
        ("Pojo<p.P:a=Int>", {"b": 1}),
        ("Map<Int,Int>", {"1": 2}),
        ("Bytes", "00"),
    ]:
        with pytest.raises((SpecError, KeyError, TypeError)):
            w.value(spec, value)


def test_one_class_name_means_one_class_per_world() -> None:
    with pytest.raises(SpecError):
        World().serializer("Tuple<Enum<p.C:A>,Enum<p.C:A,B>>")


def test_comparison_is_strict_where_bytes_differ() -> None:
    nan = float("nan")
    assert mismatch(nan, nan) is None
    assert mismatch(0.0, -0.0) is not None
    assert mismatch(1, True) is not None
    assert mismatch(Row([1], RowKind.DELETE), Row([1], RowKind.INSERT)) is not None
    assert mismatch(Row([1], RowKind.DELETE), Row([1], RowKind.DELETE)) is None
    assert mismatch({1: 2, 3: 4}, {3: 4, 1: 2}) is not None  # order is byte order
    assert mismatch([1.0, nan], [1.0, nan]) is None
    assert mismatch((1,), [1]) is not None
    assert mismatch(decimal.Decimal("1.5"), 1.5) is not None
    assert mismatch(dt.datetime(1970, 1, 1, 0, 0, 1), Timestamp(1000, 0)) is None
    assert mismatch(dt.datetime(1970, 1, 1), dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)) is not None
    assert mismatch(b"\x00", bytearray(b"\x00")) is None
    assert mismatch("a", None) is not None


def test_without_classes_turns_user_classes_into_names_and_records() -> None:
    w = World()
    v = w.value(
        "Tuple<Enum<p.C:A,B>,Pojo<p.P:x=Int,e=Enum<p.C:A,B>>,List<Pojo<p.P:x=Int,e=Enum<p.C:A,B>>>>",
        ["B", {"x": 1, "e": "A"}, [None]],
    )
    plain = without_classes(v, w)
    assert plain == ("B", {"x": 1, "e": "A"}, [None])
    assert mismatch(plain, ("B", {"e": "A", "x": 1}, [None])) is None  # records ignore key order
    assert mismatch(plain, ("B", {"e": "A"}, [None])) is not None
    ts = Timestamp(1, 2)
    assert without_classes(ts, w) is ts  # statemorph's own dataclasses stay


def test_nan_payloads_are_kept_and_compared() -> None:
    w = World()
    payload = w.value("Float", {"$fbits": "7fc00001"})
    assert struct.pack(">f", payload).hex() == "7fc00001"
    assert struct.pack(">d", w.value("Double", {"$dbits": "fff8000000000000"})).hex() == "fff8000000000000"
    assert mismatch(payload, float("nan")) is not None
    assert mismatch(float("nan"), payload) is None  # a canonical NaN expects any NaN
