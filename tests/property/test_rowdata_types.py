"""Property: every logical type prints to strings that parse back to an equal type.

The strategies here (``logical_types``, ``row_types``) are reused by the other RowData property tests.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from statemorph.types import (
    MAX_LENGTH,
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
    parse_type,
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
    st.builds(TimestampType, st.integers(0, 9)),
    st.builds(LocalZonedTimestampType, st.integers(0, 9)),
)


def _with_nullability(s: st.SearchStrategy[LogicalType]) -> st.SearchStrategy[LogicalType]:
    return st.tuples(s, st.booleans()).map(lambda tn: tn[0].copy(nullable=tn[1]))


def _rows(children: st.SearchStrategy[LogicalType], max_fields: int = 4) -> st.SearchStrategy[RowType]:
    return st.lists(st.tuples(names, children, descriptions), max_size=max_fields,
                    unique_by=lambda f: f[0]).map(lambda fs: RowType(tuple(RowField(*f) for f in fs)))


def _extend(children: st.SearchStrategy[LogicalType]) -> st.SearchStrategy[LogicalType]:
    return _with_nullability(st.one_of(
        st.builds(ArrayType, children),
        st.builds(MultisetType, children),
        st.builds(MapType, children, children),
        _rows(children),
    ))


logical_types: st.SearchStrategy[LogicalType] = st.recursive(
    _with_nullability(atomic_types), _extend, max_leaves=8
)
row_types: st.SearchStrategy[RowType] = _rows(logical_types, max_fields=5)


@given(logical_types)
def test_parse_of_printed_type_is_equal(t: LogicalType) -> None:
    assert parse_type(str(t)) == t
    assert parse_type(t.as_serializable_string()) == t
    assert hash(parse_type(str(t))) == hash(t)


@given(logical_types)
def test_keywords_are_case_insensitive(t: LogicalType) -> None:
    # lower-casing only keywords: names and comments are quoted, so flip the case of the
    # unquoted parts by lower-casing a type with no rows (names would change otherwise)
    if "`" not in str(t) and "'" not in str(t):
        assert parse_type(str(t).lower()) == t
