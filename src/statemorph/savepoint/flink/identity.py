"""What a new savepoint needs to describe itself the way Flink does (the OperatorID of a uid:
:mod:`.operator_ids`).

- :func:`checkpoint_properties`: the Java-serialized ``CheckpointProperties`` that closes a
  version 4+ ``_metadata`` file, written from class descriptors (never captured bytes), so a
  savepoint statemorph creates from scratch ends like one Flink wrote.
"""

from __future__ import annotations

from ...javaser.nodes import SC_ENUM, SC_SERIALIZABLE, ClassDesc, FieldDesc, JEnum, JObject
from ...javaser.writer import write_stream


def _signed(v: int) -> int:
    return v - (1 << 64) if v >= 1 << 63 else v


_ENUM = ClassDesc("java.lang.Enum", 0, SC_ENUM | SC_SERIALIZABLE)
_FORMAT_TYPE = ClassDesc("org.apache.flink.core.execution.SavepointFormatType", 0, SC_ENUM | SC_SERIALIZABLE,
                         (), _ENUM)
_POST_ACTION = ClassDesc("org.apache.flink.runtime.checkpoint.SavepointType$PostCheckpointAction", 0,
                         SC_ENUM | SC_SERIALIZABLE, (), _ENUM)
_SAVEPOINT_TYPE = ClassDesc(
    "org.apache.flink.runtime.checkpoint.SavepointType", _signed(0xA087D308A45814B8), SC_SERIALIZABLE,
    (FieldDesc("L", "formatType", "Lorg/apache/flink/core/execution/SavepointFormatType;"),
     FieldDesc("L", "name", "Ljava/lang/String;"),
     FieldDesc("L", "postCheckpointAction",
               "Lorg/apache/flink/runtime/checkpoint/SavepointType$PostCheckpointAction;")))
_FLAGS = ("discardCancelled", "discardFailed", "discardFinished", "discardSubsumed", "discardSuspended",
          "forced", "unclaimed")
_PROPERTIES = ClassDesc(
    "org.apache.flink.runtime.checkpoint.CheckpointProperties", 2, SC_SERIALIZABLE,
    (*(FieldDesc("Z", f) for f in _FLAGS),
     FieldDesc("L", "checkpointType", "Lorg/apache/flink/runtime/checkpoint/SnapshotType;")))

SAVEPOINT = ("Savepoint", "NONE")
"""``SavepointType.savepoint(format)``: what a triggered savepoint (and the State Processor API)
records."""
SUSPEND = ("Suspend Savepoint", "SUSPEND")
"""``SavepointType.suspend(format)``: what ``stop --savepoint`` records."""


def checkpoint_properties(kind: tuple[str, str] = SAVEPOINT, *, format_type: str = "CANONICAL",
                          forced: bool = True) -> bytes:
    """``CheckpointProperties.forSavepoint(forced, format)`` (or the suspend variant) as the Java
    object stream ``_metadata`` ends with."""
    name, action = kind
    savepoint_type = JObject(_SAVEPOINT_TYPE, {
        "formatType": JEnum(_FORMAT_TYPE, format_type),
        "name": name,
        "postCheckpointAction": JEnum(_POST_ACTION, action),
    })
    values: dict[str, object] = {f: False for f in _FLAGS}
    values["forced"] = forced
    values["checkpointType"] = savepoint_type
    return write_stream(JObject(_PROPERTIES, values))


__all__ = ["SAVEPOINT", "SUSPEND", "checkpoint_properties"]
