"""Helpers of the bulk equivalence tests: the leaf types each kernel handles, rows as Arrow arrays
and as the reference's bytes, and one call run on every kernel tier with its outcome (result or
error, row and field path) compared across tiers."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
from tiers import on_tiers

from statemorph import arrow, bulk
from statemorph.types import (
    ArrayType,
    BigIntType,
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntType,
    MapType,
    RowType,
    SmallIntType,
    TimestampType,
    TimeType,
    TinyIntType,
    VarBinaryType,
    VarCharType,
)

ARROW_LEAVES: list[Any] = [
    BooleanType(), TinyIntType(), SmallIntType(), IntType(), BigIntType(), FloatType(), DoubleType(),
    VarCharType(2147483647), VarBinaryType(2147483647), DateType(), TimeType(3), DecimalType(10, 2),
    DecimalType(18, 0), TimestampType(3),
]
# only the migrate kernel handles these in place (encode / decode take the per-value path)
_SMALL_ROW = RowType.of(("a", IntType()), ("s", VarCharType(2147483647)))
REMAP_ONLY_LEAVES: list[Any] = [
    DecimalType(20, 2), TimestampType(6), TimestampType(9), ArrayType(IntType()),
    MapType(VarCharType(2147483647), BigIntType()), ArrayType(VarCharType(2147483647)),
    ArrayType(_SMALL_ROW), MapType(IntType(), _SMALL_ROW), ArrayType(ArrayType(_SMALL_ROW)),
]


def all_tiers(fn: Any) -> dict[str, Any]:
    """Run ``fn()`` once per tier: ("ok", result), or the error's type, row and field path."""

    def outcome() -> Any:
        try:
            return ("ok", fn())
        except Exception as e:  # noqa: BLE001 - compared across tiers below
            return ("error", type(e).__name__, getattr(e, "row", None), getattr(e, "field_path", None))

    return on_tiers(outcome)


def arrow_rows(t: RowType, rows: list[Any]) -> pa.Array:
    """Python rows of type ``t`` as the Arrow array the bulk API takes (None: a null row)."""
    return pa.array([None if r is None else bulk.types.logical_to_arrow(r, t) for r in rows], type=arrow.arrow_type(t))


def ref_bytes(s: Any, rows: list[Any]) -> list[bytes | None]:
    """What the per-value reference serializer ``s`` writes for each row."""
    return [None if r is None else s.to_bytes(r) for r in rows]
