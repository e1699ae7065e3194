"""Hypothesis strategies shared by several test subjects (one home, imported as ``strategies``).

Why one module: the logical-type generators and the byte corruptor were copied between test files,
and test files imported helpers from each other; every shared strategy lives here instead.
``tests/`` is on ``sys.path`` because ``tests/conftest.py`` sits there (pytest's rootdir conftest).
"""

from __future__ import annotations

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
