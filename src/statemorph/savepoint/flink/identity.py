"""What a new savepoint needs to name an operator and describe itself the way Flink does.

- :func:`operator_id`: the 16-byte OperatorID Flink derives from a user-set uid
  (``StreamGraphHasherV2.generateUserSpecifiedHash``: Guava's ``murmur3_128`` with seed 0 over the
  uid's UTF-8 bytes; ``_metadata`` holds the hash bytes in Guava's ``asBytes`` order, which is
  also how ``AbstractID.toHexString`` prints the id). A restoring job matches operators by this id,
  so a bootstrapped savepoint must compute it exactly.
- :func:`checkpoint_properties`: the Java-serialized ``CheckpointProperties`` that closes a
  version 4+ ``_metadata`` file, written from class descriptors (never captured bytes), so a
  savepoint statemorph creates from scratch ends like one Flink wrote.
"""

from __future__ import annotations

from ...javaser.nodes import SC_ENUM, SC_SERIALIZABLE, ClassDesc, FieldDesc, JEnum, JObject
from ...javaser.writer import write_stream

_M64 = (1 << 64) - 1
_C1 = 0x87C37B91114253D5
_C2 = 0x4CF5AD432745937F


def _rotl64(v: int, n: int) -> int:
    return ((v << n) | (v >> (64 - n))) & _M64


def _fmix64(k: int) -> int:
    k ^= k >> 33
    k = (k * 0xFF51AFD7ED558CCD) & _M64
    k ^= k >> 33
    k = (k * 0xC4CEB9FE1A85EC53) & _M64
    k ^= k >> 33
    return k


def _mix_k1(k1: int) -> int:
    return (_rotl64((k1 * _C1) & _M64, 31) * _C2) & _M64


def _mix_k2(k2: int) -> int:
    return (_rotl64((k2 * _C2) & _M64, 33) * _C1) & _M64


def murmur3_128(data: bytes, seed: int = 0) -> bytes:
    """Guava's ``Hashing.murmur3_128(seed).hashBytes(data).asBytes()`` (MurmurHash3 x64 128)."""
    h1 = h2 = seed & _M64
    n = len(data)
    full = n - n % 16
    for i in range(0, full, 16):
        k1 = int.from_bytes(data[i : i + 8], "little")
        k2 = int.from_bytes(data[i + 8 : i + 16], "little")
        h1 ^= _mix_k1(k1)
        h1 = _rotl64(h1, 27)
        h1 = (h1 + h2) & _M64
        h1 = (h1 * 5 + 0x52DCE729) & _M64
        h2 ^= _mix_k2(k2)
        h2 = _rotl64(h2, 31)
        h2 = (h2 + h1) & _M64
        h2 = (h2 * 5 + 0x38495AB5) & _M64
    tail = data[full:]
    if tail:
        k1 = int.from_bytes(tail[:8], "little")
        k2 = int.from_bytes(tail[8:], "little") if len(tail) > 8 else 0
        h1 ^= _mix_k1(k1)
        if k2 or len(tail) > 8:
            h2 ^= _mix_k2(k2)
    h1 ^= n
    h2 ^= n
    h1 = (h1 + h2) & _M64
    h2 = (h2 + h1) & _M64
    h1 = _fmix64(h1)
    h2 = _fmix64(h2)
    h1 = (h1 + h2) & _M64
    h2 = (h2 + h1) & _M64
    return h1.to_bytes(8, "little") + h2.to_bytes(8, "little")


def operator_id(uid: str) -> bytes:
    """The OperatorID bytes (as ``_metadata`` stores them) of an operator with user-set ``uid``."""
    return murmur3_128(uid.encode("utf-8"))


# -- CheckpointProperties ------------------------------------------------------------------------

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


__all__ = ["SAVEPOINT", "SUSPEND", "checkpoint_properties", "murmur3_128", "operator_id"]
