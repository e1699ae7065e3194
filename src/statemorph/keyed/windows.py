"""Window namespaces as table columns: ``window_start`` / ``window_end`` (time windows),
``window_end`` alone (Flink SQL window-TVF operators) or ``window_id`` (Flink SQL count windows),
decoded from a state's binary ``namespace`` column.

Flink SQL's window table functions (window aggregates, joins, ranks and deduplications) keep
their state and timers under a ``Long`` namespace: the end of the window, or of the slice for
HOP / CUMULATE windows, whose accumulators Flink keeps per slice (``SliceAssigner``); for a
``TIMESTAMP_LTZ`` time attribute it is in the session time zone's wall-clock milliseconds (epoch
milliseconds under UTC). Nothing else in Flink keys state by a ``Long`` namespace, so a
``LongSerializer`` namespace reads as ``window_end``.

Window state (window contents, trigger state, window timers) is keyed by (key, window); a table of
it is only useful when the window can be seen and filtered on. The raw ``namespace`` column stays
beside the decoded ones, so what is written back is the bytes that were read. The namespaces have
a fixed length (16 bytes: two big-endian longs; 8 bytes: one), so the columns are cut from the
column's data buffer in one step instead of per value.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import MalformedDataError, UsageError
from ..serializers.primitives import LongSerializer
from ..serializers.windows import TIME_WINDOW_SERIALIZERS, CountWindowSerializer
from .entries import COL_NAMESPACE

WINDOW_START = "window_start"
WINDOW_END = "window_end"
WINDOW_ID = "window_id"


def window_column_names(namespace_serializer: Any) -> list[str]:
    """The decoded columns a state in this namespace gains (none for void or global windows)."""
    if isinstance(namespace_serializer, TIME_WINDOW_SERIALIZERS):
        return [WINDOW_START, WINDOW_END]
    if isinstance(namespace_serializer, CountWindowSerializer):
        return [WINDOW_ID]
    if type(namespace_serializer) is LongSerializer:  # a window-TVF operator's window end
        return [WINDOW_END]
    return []


def window_columns(namespace_serializer: Any, namespace: pa.Array | pa.ChunkedArray) -> list[tuple[str, pa.Array]]:
    """The decoded window columns of a binary namespace column (int64, big-endian longs)."""
    names = window_column_names(namespace_serializer)
    if not names:
        return []
    arr = namespace.combine_chunks() if isinstance(namespace, pa.ChunkedArray) else namespace
    width = 8 * len(names)
    longs = _fixed_longs(arr.cast(pa.binary()), width)
    return [(name, pa.array(longs[:, i])) for i, name in enumerate(names)]


def _fixed_longs(arr: pa.BinaryArray, width: int) -> np.ndarray:
    n = len(arr)
    if n == 0:
        return np.zeros((0, width // 8), dtype=np.int64)
    if arr.null_count:
        raise MalformedDataError("a window namespace is null")
    lengths = pc.binary_length(arr)
    if pc.min(lengths).as_py() != width or pc.max(lengths).as_py() != width:
        bad = pc.index(pc.not_equal(lengths, width), True).as_py()
        raise MalformedDataError(f"window namespace of row {bad} has {lengths[bad].as_py()} bytes, expected {width}")
    offsets = np.frombuffer(arr.buffers()[1], dtype=np.int32, count=n + 1, offset=arr.offset * 4)
    data = arr.buffers()[2]
    start = int(offsets[0])
    raw = np.frombuffer(data, dtype=">i8", count=n * width // 8, offset=start)
    return raw.astype(np.int64).reshape(n, width // 8)


def window_namespaces(namespace_serializer: Any, columns: list[pa.Array | pa.ChunkedArray]) -> pa.BinaryArray:
    """The inverse of :func:`window_columns`: namespace bytes from the window columns (in the
    order :func:`window_column_names` gives), for writing window state from a table."""
    names = window_column_names(namespace_serializer)
    if len(columns) != len(names) or not names:
        raise ValueError(f"{type(namespace_serializer).__name__} namespaces are built from {names}")
    longs = []
    for name, col in zip(names, columns, strict=True):
        if col.null_count:
            raise UsageError(f"column {name!r} has nulls: every window needs its {name}")
        longs.append(np.asarray(col.cast(pa.int64()).to_numpy(zero_copy_only=False), dtype=np.int64))
    n = len(longs[0])
    width = 8 * len(names)
    data = np.stack(longs, axis=1).astype(">i8").tobytes()
    offsets = np.arange(0, n * width + 1, width, dtype=np.int32)
    return pa.BinaryArray.from_buffers(pa.binary(), n, [None, pa.py_buffer(offsets.tobytes()), pa.py_buffer(data)])


def with_window_columns(batch: pa.RecordBatch, namespace_serializer: Any) -> pa.RecordBatch:
    """``batch`` with the decoded window columns inserted right after its ``namespace`` column."""
    cols = window_columns(namespace_serializer, batch.column(COL_NAMESPACE))
    if not cols:
        return batch
    at = batch.schema.get_field_index(COL_NAMESPACE) + 1
    names = list(batch.schema.names)
    arrays = list(batch.columns)
    for k, (name, col) in enumerate(cols):
        names.insert(at + k, name)
        arrays.insert(at + k, col)
    return pa.RecordBatch.from_arrays(arrays, names)


__all__ = ["WINDOW_END", "WINDOW_ID", "WINDOW_START", "window_column_names", "window_columns",
           "window_namespaces", "with_window_columns"]
