"""What each operation means for a native savepoint or a retained checkpoint of Flink's RocksDB
backend (the :class:`~statemorph.engine.formats.FlinkNative` format): ``inspect`` adds what it is
and the RocksDB files each subtask needs to the canonical document; ``convert`` writes a canonical
savepoint (``to="canonical"``), which real Flink restores into either backend, or the Parquet
form; a migration is written as a canonical savepoint. The last two go by way of a canonical
savepoint staged beside the destination and removed after (so the Parquet form keeps what
``convert`` back to Flink needs, and a migration is the canonical one, planned on the native
savepoint first: an incompatible state stops it before a byte is written)."""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

from ..errors import UsageError
from ..savepoint.flink.native import NativeSavepoint
from ..savepoint.flink.native_view import NativeFlinkSavepoint
from ..typeutils import SnapshotRegistry
from .convert import ConvertReport, flink_to_parquet
from .flink import FlinkMigrateReport, OperatorDescriptors, inspect_flink_savepoint, plan_flink_savepoint

T = TypeVar("T")


def inspect_native(path: str | os.PathLike[str], *, names: Iterable[str] = ()) -> dict[str, Any]:
    """The canonical ``inspect --json`` document of the savepoint read through its RocksDB
    instances, plus ``savepoint_format`` ("native savepoint", "incremental checkpoint chk-N",
    "checkpoint chk-N") and per operator its ``subtasks`` (key groups, RocksDB files, sizes, and
    per state whether its SST files are read directly or through RocksDB, and why)."""
    doc = inspect_flink_savepoint(path, names=names, reader=NativeFlinkSavepoint)
    native = NativeSavepoint(path).inspect(count_entries=False, readers=True)
    doc["savepoint_format"] = native.format
    subtasks = {o.uid_hash: [s.to_json() for s in o.subtasks] for o in native.operators}
    for op in doc["operators"]:
        op["subtasks"] = subtasks.get(op["uid_hash"], [])
    return doc


def convert_native(src: str | os.PathLike[str], dst: str | os.PathLike[str], *, to: str = "parquet",
                   registry: SnapshotRegistry | None = None, rows_per_file: int = 1_000_000) -> ConvertReport:
    """Convert the native savepoint or checkpoint ``src`` to ``to`` (``parquet`` | ``canonical``) at ``dst``."""
    sp = NativeSavepoint(src, registry)
    if to == "canonical":
        counts = sp.to_canonical(dst)
        streams = sum(1 for _ in sp.instances())
        return ConvertReport(str(src), str(dst), "native-to-canonical", counts, streams, 0)
    report = _through_canonical(sp, dst, lambda canonical: flink_to_parquet(
        canonical, dst, registry=registry, rows_per_file=rows_per_file))
    return ConvertReport(str(src), str(dst), "native-to-parquet", report.states, report.streams,
                         report.carried_files)


def migrate_native(src: str | os.PathLike[str], dst: Any, descriptors: OperatorDescriptors,
                   migrate: Callable[[Path], FlinkMigrateReport]) -> FlinkMigrateReport:
    """``migrate`` (the canonical migration, given the staged canonical savepoint) of the native
    savepoint ``src``, planned and checked on ``src`` itself first; the report names ``src``."""
    t0 = time.perf_counter()
    plan = plan_flink_savepoint(src, descriptors, reader=NativeFlinkSavepoint)
    plan.raise_if_incompatible()
    if not isinstance(dst, (str, os.PathLike)):
        raise UsageError(f"{src} is a native savepoint or checkpoint: its migration is written to a local directory")
    report = _through_canonical(NativeSavepoint(src), dst, migrate)
    report.source = os.fspath(src)
    report.plan = plan
    report.seconds = time.perf_counter() - t0
    return report


def _through_canonical(sp: NativeSavepoint, dst: str | os.PathLike[str], then: Callable[[Path], T]) -> T:
    """``then(canonical)`` with ``sp`` converted to a canonical savepoint in a scratch directory
    beside ``dst`` (same file system, named as a statemorph temporary), removed afterwards."""
    parent = Path(dst).absolute().parent
    scratch = Path(tempfile.mkdtemp(prefix=f".{Path(dst).name}.statemorph-canonical-", dir=parent))
    try:
        canonical = scratch / "canonical"
        sp.to_canonical(canonical)
        return then(canonical)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


__all__ = ["convert_native", "inspect_native", "migrate_native"]
