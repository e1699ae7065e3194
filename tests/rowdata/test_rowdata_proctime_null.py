"""A ``*PROCTIME*`` column is NOT NULL in its type but left null in some operators' state (Flink's
processing-time interval join buffers its rows with the column unmaterialised; its BinaryRowWriter
checks no nullability). Both tiers write such a null back, where Flink wrote it, byte for byte;
any other NOT NULL field still refuses a null."""

from __future__ import annotations

import pyarrow as pa
import pytest
from tiers import on_tiers

from statemorph.bulk import encode
from statemorph.errors import StatemorphError
from statemorph.serializers import RowDataSerializer

PROCTIME = "ROW<k INT, x BIGINT, pt TIMESTAMP_LTZ(3) NOT NULL *PROCTIME*>"
ROWTIME = "ROW<k INT, x BIGINT, rt TIMESTAMP_LTZ(3) NOT NULL *ROWTIME*>"


def test_a_null_proctime_column_is_written_back_on_every_tier() -> None:
    ser = RowDataSerializer(PROCTIME)
    one = ser.to_bytes((7, 21, None))  # the per-value writer (before: "pt: null in a NOT NULL field")
    assert ser.to_bytes(ser.from_bytes(one)) == one
    column = pa.array([{"k": 7, "x": 21, "pt": None}, {"k": 8, "x": 22, "pt": None}],
                      type=pa.struct([("k", pa.int32()), ("x", pa.int64()), ("pt", pa.timestamp("ms", "UTC"))]))
    written = on_tiers(lambda: encode(column, ser).values.to_pylist())
    assert all(got[0] == one for got in written.values()), written
    assert len(set(map(tuple, written.values()))) == 1


def test_any_other_not_null_field_still_refuses_a_null() -> None:
    with pytest.raises(StatemorphError, match="rt: null in a NOT NULL field"):
        RowDataSerializer(ROWTIME).to_bytes((7, 21, None))
