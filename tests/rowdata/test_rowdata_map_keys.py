"""The one definition of a duplicate RowData map key (issue 16, item 2): equal values, as the
reference reads them (``binary_layout.MapCodec``), and the bulk kernels never decide
otherwise: they hand maps whose keys may repeat to the reference.

Why here: the rule belongs to the BinaryMapData format; these cases pin its edges (float zero
signs, NaN, null keys, the same string stored inline and out of line) on the per-value reader
and on every bulk path, both tiers.
"""

from __future__ import annotations

import struct
from typing import Any

import pyarrow as pa
import pytest

from statemorph import bulk
from statemorph import serializers as S
from statemorph.errors import MalformedDataError
from statemorph.migration import migrate_bytes

STRINGS = S.RowDataSerializer("ROW<m MAP<STRING, INT>>")
STRINGS_ADDED = S.RowDataSerializer("ROW<m MAP<STRING, INT>, z INT>")


def _row_with_map(keys: bytes, values: bytes) -> bytes:
    """A serialized ROW<m MAP<...>> around a hand-built key and value array."""
    m = struct.pack("<i", len(keys)) + keys + values
    pad = bytes(-len(m) % 8)
    row = bytes(8) + struct.pack("<Q", (16 << 32) | len(m)) + m + pad
    return struct.pack(">i", len(row)) + row


def _abc_twice() -> bytes:
    """Keys "abc" (inline in its slot) and "abc" (out of line): one value, two layouts."""
    inline = b"abc" + bytes(4) + bytes([0x80 | 3])
    out_of_line = struct.pack("<Q", (24 << 32) | 3)
    keys = struct.pack("<i", 2) + bytes(4) + inline + out_of_line + b"abc" + bytes(5)
    values = struct.pack("<i", 2) + bytes(4) + struct.pack("<ii", 1, 2)
    return _row_with_map(keys, values)


def _verdicts(ser: Any, raw: bytes) -> dict[str, Any]:
    """What every path makes of ``raw``: the reference, bulk decode, migrate_bytes and bulk
    migrate (as is, and with a field added)."""
    def outcome(fn: Any) -> Any:
        try:
            return ("ok", fn())
        except MalformedDataError as e:
            return ("error", type(e).__name__, "duplicate map key" in str(e))

    snap = ser.snapshot_configuration()
    out: dict[str, Any] = {"from_bytes": outcome(lambda: len(ser.from_bytes(raw)[0]))}
    got, errs = bulk.decode(pa.array([raw]), ser, on_error="null")
    out["bulk decode"] = ("error", type(errs[0]).__name__, "duplicate map key" in str(errs[0])) if errs \
        else ("ok", len(got[0]["m"]))
    for new, name in ((ser, "as-is"), (STRINGS_ADDED if ser is STRINGS else None, "added")):
        if new is None:
            continue
        ref = outcome(lambda n=new: migrate_bytes(snap, n, raw))
        got, errs = bulk.migrate(pa.array([raw]), snap, new, on_error="null")
        out[f"migrate {name}"] = ref
        out[f"bulk migrate {name}"] = ("error", type(errs[0]).__name__, "duplicate map key" in str(errs[0])) \
            if errs else ("ok", got[0].as_py())
    return out


def test_the_same_string_inline_and_out_of_line_is_one_key(tier: str) -> None:
    raw = _abc_twice()
    verdicts = _verdicts(STRINGS, raw)
    assert set(verdicts.values()) == {("error", "MalformedDataError", True)}, verdicts


@pytest.mark.parametrize("spec,pairs,duplicate", [
    ("DOUBLE", [(0.0, 1), (-0.0, 2)], True),  # equal values
    ("FLOAT", [(-0.0, 1), (0.0, 2)], True),
    ("DOUBLE", [(float("nan"), 1), (float("nan"), 2)], False),  # a NaN equals no key, itself included
    ("STRING", [(None, 1), (None, 2)], True),  # a null key is a value like any other
    ("STRING", [(None, 1), ("", 2)], False),
    ("BOOLEAN", [(True, 1), (False, 2), (True, 3)], True),
    ("BIGINT", [(i, i) for i in range(20)] + [(7, 0)], True),  # past 8 keys: the hash set
    ("BIGINT", [(i, i) for i in range(20)], False),
    ("ARRAY<INT>", [([1, 2], 1), ([1, 2], 2)], True),
    ("ARRAY<INT>", [([1, 2], 1), ([2, 1], 2)], False),
])
def test_duplicate_keys_are_equal_values_on_every_path(tier: str, spec: str, pairs: list[Any],
                                                       duplicate: bool) -> None:
    ser = S.RowDataSerializer(f"ROW<m MAP<{spec}, INT>>")
    raw = ser.to_bytes(([(k, v) for k, v in pairs],))  # a list of pairs is written as it is
    verdicts = _verdicts(ser, raw)
    if duplicate:
        assert set(verdicts.values()) == {("error", "MalformedDataError", True)}, verdicts
        return
    if any(k is None for k, _ in pairs):  # read, but an Arrow map key cannot be null (docs/bulk.md)
        assert verdicts.pop("bulk decode") == ("error", "UnrepresentableValueError", False)
    else:
        assert verdicts["bulk decode"] == ("ok", len(pairs)), verdicts
    assert verdicts["from_bytes"] == ("ok", len(pairs))
    assert verdicts["bulk migrate as-is"] == verdicts["migrate as-is"] == ("ok", raw)
