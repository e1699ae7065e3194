"""Property: every logical type prints to strings that parse back to an equal type.

The strategies (``logical_types``, ``row_types``) live in tests/strategies.py.
"""

from __future__ import annotations

from hypothesis import given
from strategies import logical_types

from statemorph.types import LogicalType, parse_type


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
