"""Which serializers the bulk kernels encode and decode, and which snapshot → serializer pairs a
byte-remap kernel migrates: the ONE table, keyed by classes.

Why one table: bulk encode / decode / migrate, the engines and the RocksDB backend all ask "does a
kernel handle this?"; answering it in one place, by class (an exact type: a subclass may change
the format), keeps them from disagreeing. The table says which kernel family takes a serializer;
whether a given configuration fits it (a RowData type the programs can express, a Row whose
fields all have kernels, a plan that is a pure byte remap) is up to that family's program
compiler, and anything it refuses goes per value through the reference serializers.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import pyarrow as pa

from ..serializers import SERIALIZER_CLASSES
from ..typeutils import TypeSerializerSnapshot
from .tiers import abi, plans
from .types import simple_arrow_type


@dataclasses.dataclass(frozen=True)
class Codec:
    """The encode / decode kernel family of a serializer class: ``fixed`` (one fixed-width column
    of ``kind``, Arrow type ``arrow``), ``varlen`` / ``bytes`` (a string or binary column ``arrow``
    through the kernel functions named ``kernel_*``), ``rowdata`` (BinaryRowData) or ``corerow``
    (flink-core Row); see ``serializers.BulkKernel``."""

    family: str
    kind: int = -1
    arrow: pa.DataType | None = None
    kernel: str = ""


def _codec_of(cls: type) -> Codec | None:
    """The codec a serializer class declares (its own ``BULK``; a fixed-width one's column kind
    is the ABI's ``LEAF_*`` it names, its Arrow type that of its ``VALUE_TYPE``)."""
    declared = getattr(cls, "declared", None)
    bulk = declared("BULK") if declared is not None else None
    if bulk is None or not bulk.family:
        return None
    if bulk.family == "fixed":
        return Codec("fixed", getattr(abi, bulk.leaf), simple_arrow_type(cls))
    if bulk.family in ("varlen", "bytes"):
        return Codec(bulk.family, arrow=simple_arrow_type(cls), kernel=bulk.kernel)
    return Codec(bulk.family)


CODECS: dict[type, Codec] = {cls: c for cls in SERIALIZER_CLASSES if (c := _codec_of(cls)) is not None}
"""Serializer class → its encode / decode kernel family, as each class declares it (``BULK``).
Every other serializer (Tuple, POJO, Avro, collections, Enum ...) is encoded and decoded per
value."""


def _rowdata_program(prior_snapshot: Any, new_serializer: Any) -> plans.RowProgram:
    from ..migration import plan_row_migration

    return plans.compile_migration_program(plan_row_migration(prior_snapshot.row_type, new_serializer.row_type))


@dataclasses.dataclass(frozen=True)
class Remap:
    """A byte-remap kernel (``rowdata``, ``core``, ``pojo`` or ``avro``) for one snapshot class →
    serializer class pair: ``applies(compat)`` says whether the resolved compatibility is one it
    remaps, ``compile(prior_snapshot, new_serializer)`` builds its program (or raises
    ``NotByteRemappable``)."""

    kernel: str
    applies: Callable[[Any], bool]
    compile: Callable[[Any, Any], Any]


_REMAP_KERNELS: dict[str, Remap] = {
    "rowdata": Remap("rowdata", lambda compat: True, _rowdata_program),
    "core": Remap("core", lambda compat: not compat.is_compatible_with_reconfigured_serializer(),
                  plans.compile_core_row_program),
    "pojo": Remap("pojo", lambda compat: compat.is_compatible_after_migration(), plans.compile_pojo_program),
    "avro": Remap("avro", lambda compat: compat.is_compatible_after_migration(), plans.compile_avro_program),
}
"""Each byte-remap kernel: which compatibilities it remaps and its program compiler."""


def _snapshot_classes(root: type = TypeSerializerSnapshot) -> list[type]:
    found: list[type] = []
    subclasses: list[type] = type.__subclasses__(root)
    for sub in subclasses:
        found += [sub, *_snapshot_classes(sub)]
    return found


REMAPS: dict[tuple[type, type], Remap] = {
    (snap, declared[1]): _REMAP_KERNELS[declared[0]]
    for snap in _snapshot_classes() if (declared := vars(snap).get("BYTE_REMAP")) is not None
}
"""(snapshot class, serializer class) → its byte-remap kernel, as each snapshot class declares it
(``BYTE_REMAP``). Every other pair migrates per value."""


def codec(serializer: Any) -> Codec | None:
    """The encode / decode kernel family of ``serializer`` (its exact class), or None."""
    cls = type(serializer)
    return CODECS[cls] if cls in CODECS else _codec_of(cls)


def fixed_kind(serializer: Any) -> tuple[int, pa.DataType] | None:
    """(column kind, Arrow type) of a fixed-width primitive serializer, or None."""
    c = codec(serializer)
    return (c.kind, c.arrow) if c is not None and c.family == "fixed" else None  # type: ignore[return-value]


def row_program(serializer: Any, encode: bool = False) -> plans.RowProgram | None:
    """The BinaryRowData program of a ``RowDataSerializer`` whose type the kernels encode (or
    decode), else None."""
    c = codec(serializer)
    if c is None or c.family != "rowdata":
        return None
    prog = plans.compile_row_program(serializer.row_type)
    return prog if (prog.encode_supported() if encode else prog.decode_supported()) else None


def core_row_program(serializer: Any) -> plans.RowProgram | None:
    """The encode / decode program of a flink-core ``RowSerializer`` whose fields all have
    kernels, else None."""
    c = codec(serializer)
    return plans.compile_core_row_codec(serializer) if c is not None and c.family == "corerow" else None


def remap_program(prior_snapshot: Any, new_serializer: Any, compat: Any) -> tuple[Any, str]:
    """The byte-remap kernel for this pair and its program, or (None, "") when the migration goes
    per value (no such kernel, or a plan its program compiler cannot express)."""
    remap = REMAPS.get((type(prior_snapshot), type(new_serializer)))
    if remap is None or not remap.applies(compat):
        return None, ""
    try:
        return remap.compile(prior_snapshot, new_serializer), remap.kernel
    except plans.NotByteRemappable:
        return None, ""


def migrates_with_kernel(prior_snapshot: Any, new_serializer: Any) -> bool:
    """Whether :func:`statemorph.bulk.migrate` runs a byte-remap kernel for this pair (the RocksDB
    backend then migrates a chunk at a time through it; other pairs would go per value inside
    it anyway, so the backend keeps its own per-entry path for them)."""
    if (type(prior_snapshot), type(new_serializer)) not in REMAPS:
        return False
    compat = prior_snapshot.resolve_schema_compatibility(new_serializer)
    return not compat.is_incompatible() and remap_program(prior_snapshot, new_serializer, compat)[0] is not None


__all__ = ["CODECS", "REMAPS", "Codec", "Remap", "codec", "core_row_program", "fixed_kind", "migrates_with_kernel",
           "remap_program", "row_program"]
