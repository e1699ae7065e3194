"""Flink's window namespaces: the serializers of the windows that keyed window state lives under.

A window operator keeps its state (window contents, trigger state) and its timers in the
namespace of the window they belong to, written by the window's serializer:

- DataStream ``TimeWindow`` (``org.apache.flink.streaming.api.windowing.windows``): ``start`` and
  ``end`` as two big-endian longs, 16 bytes (``getLength() == 16``);
- DataStream ``GlobalWindow``: one byte, written as 0 and ignored on read (``getLength() == 1``);
- Flink SQL's ``TimeWindow`` (``org.apache.flink.table.runtime.operators.window``): the same two
  longs under another class name;
- Flink SQL's ``CountWindow``: the window id, one long (``getLength() == 8``).

(Flink SQL's window-TVF aggregates key their state by the window end, a plain ``LongSerializer``
namespace.) Every snapshot is a ``SimpleTypeSerializerSnapshot`` (version 3, no content) under
Flink's class name, so the snapshot bytes equal Flink's, and every namespace has a fixed length,
which is what lets a composite key be split into key and namespace without a length suffix.
"""

from __future__ import annotations

import operator
from typing import Any, NamedTuple

from ..errors import SerializationError
from ..io import DataInputDeserializer, DataOutputSerializer
from ..types import BigIntType, RowType
from ..typeutils import NamedSingleton, SingletonSerializer, TypeSerializer, TypeSerializerSnapshot, simple_snapshot

_START_END = RowType.of(("start", BigIntType()), ("end", BigIntType()))

_STREAMING = "org.apache.flink.streaming.api.windowing.windows."
_TABLE = "org.apache.flink.table.runtime.operators.window."
_LONG_MIN, _LONG_LIMIT = -(1 << 63), 1 << 63


class TimeWindow(NamedTuple):
    """A time window ``[start, end)`` in epoch milliseconds (Flink's ``TimeWindow``; the same
    value for the DataStream and the SQL class)."""

    start: int
    end: int

    def max_timestamp(self) -> int:
        """``end - 1``: the timestamp of the window's end-of-window timer."""
        return self.end - 1


class CountWindow(NamedTuple):
    """Flink SQL's count window: its id."""

    id: int


class _GlobalWindowType(NamedSingleton):
    """The one window of ``GlobalWindows`` (Flink's ``GlobalWindow.get()``)."""

    NAME = "GlobalWindow"


GlobalWindow = _GlobalWindowType()


def _long(ser: TypeSerializer[Any], value: Any, what: str) -> int:
    try:
        v = operator.index(value)
    except TypeError:
        raise SerializationError(f"{type(ser).__name__}: {what} must be an int, got {type(value).__name__}") from None
    if not _LONG_MIN <= v < _LONG_LIMIT:
        raise SerializationError(f"{type(ser).__name__}: {what} {v} is out of range for a Java long")
    return v


class TimeWindowSerializer(TypeSerializer[TimeWindow]):
    """DataStream ``TimeWindow$Serializer``: ``long start ‖ long end``. Takes a
    :class:`TimeWindow`, a ``(start, end)`` pair or a ``{"start", "end"}`` mapping."""

    SQL_TYPE = "TIME WINDOW (start BIGINT, end BIGINT)"
    VALUE_TYPE = _START_END
    LENGTH = 16
    IMMUTABLE_VALUES = True

    def serialize(self, value: Any, out: DataOutputSerializer) -> None:
        if isinstance(value, dict):
            start, end = value.get("start"), value.get("end")
        else:
            try:
                start, end = value
            except (TypeError, ValueError):
                raise SerializationError(
                    f"{type(self).__name__} writes a TimeWindow (start, end), got {value!r}") from None
        out.write_long(_long(self, start, "start"))
        out.write_long(_long(self, end, "end"))

    def deserialize(self, src: DataInputDeserializer) -> TimeWindow:
        start = src.read_long()
        return TimeWindow(start, src.read_long())

    def snapshot_configuration(self) -> TypeSerializerSnapshot:
        return TimeWindowSerializerSnapshot()


class TableTimeWindowSerializer(TimeWindowSerializer):
    """Flink SQL's ``TimeWindow$Serializer``: the same bytes as the DataStream one, another class
    (a different serializer to Flink, so a different one here: the snapshots do not mix)."""

    SQL_TYPE = "SQL TIME WINDOW (start BIGINT, end BIGINT)"
    VALUE_TYPE = _START_END

    def snapshot_configuration(self) -> TypeSerializerSnapshot:
        return TableTimeWindowSerializerSnapshot()


class GlobalWindowSerializer(SingletonSerializer):
    """DataStream ``GlobalWindow$Serializer``: one byte, 0 when written; Flink reads any byte
    as the global window, and so does this class."""

    SQL_TYPE = "GLOBAL WINDOW"
    VALUELESS = True
    VALUE = GlobalWindow

    def deserialize(self, src: DataInputDeserializer) -> Any:
        src.read_byte()
        return GlobalWindow

    def snapshot_configuration(self) -> TypeSerializerSnapshot:
        return GlobalWindowSerializerSnapshot()


class CountWindowSerializer(TypeSerializer[CountWindow]):
    """Flink SQL's ``CountWindow$Serializer``: ``long id``. Takes a :class:`CountWindow` or an int."""

    SQL_TYPE = "SQL COUNT WINDOW (id BIGINT)"
    VALUE_TYPE = BigIntType()
    LENGTH = 8
    IMMUTABLE_VALUES = True

    def serialize(self, value: Any, out: DataOutputSerializer) -> None:
        out.write_long(_long(self, value.id if isinstance(value, CountWindow) else value, "id"))

    def deserialize(self, src: DataInputDeserializer) -> CountWindow:
        return CountWindow(src.read_long())

    def snapshot_configuration(self) -> TypeSerializerSnapshot:
        return CountWindowSerializerSnapshot()


TimeWindowSerializerSnapshot = simple_snapshot(
    TimeWindowSerializer, _STREAMING + "TimeWindow$Serializer$TimeWindowSerializerSnapshot")
GlobalWindowSerializerSnapshot = simple_snapshot(
    GlobalWindowSerializer, _STREAMING + "GlobalWindow$Serializer$GlobalWindowSerializerSnapshot")
TableTimeWindowSerializerSnapshot = simple_snapshot(
    TableTimeWindowSerializer, _TABLE + "TimeWindow$Serializer$TimeWindowSerializerSnapshot",
    "TableTimeWindowSerializerSnapshot")
CountWindowSerializerSnapshot = simple_snapshot(
    CountWindowSerializer, _TABLE + "CountWindow$Serializer$CountWindowSerializerSnapshot")


TIME_WINDOW_SERIALIZERS = (TimeWindowSerializer, TableTimeWindowSerializer)
"""The serializers whose namespaces are time windows (``window_start`` / ``window_end`` columns)."""

__all__ = ["CountWindow", "CountWindowSerializer", "CountWindowSerializerSnapshot", "GlobalWindow",
           "GlobalWindowSerializer", "GlobalWindowSerializerSnapshot", "TIME_WINDOW_SERIALIZERS",
           "TableTimeWindowSerializer", "TableTimeWindowSerializerSnapshot", "TimeWindow", "TimeWindowSerializer",
           "TimeWindowSerializerSnapshot"]
