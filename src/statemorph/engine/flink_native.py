"""What each operation means for a native savepoint or a retained checkpoint of Flink's RocksDB
backend (the :class:`~statemorph.engine.formats.FlinkNative` format): ``inspect`` adds what it is
and the RocksDB files each subtask needs to the canonical document; ``convert`` writes a canonical
savepoint (``to="canonical"``), which real Flink restores into either backend, or the Parquet
form, or a self-contained native savepoint (``to="native"``: a checkpoint's files gathered,
every file as it is); a migration is written as a canonical savepoint (the default) or as a
native savepoint (``to="native"``: :mod:`statemorph.savepoint.flink.native_writer`, unchanged
column families and files carried as they are). The Parquet form and the canonical migration go
by way of a canonical savepoint staged beside the destination and removed after (so the Parquet
form keeps what ``convert`` back to Flink needs, and a migration is the canonical one); either
migration is planned on the native savepoint first: an incompatible state stops it before a byte
is written."""

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
from ..savepoint.flink.native_writer import write_native
from ..savepoint.flink.operator_state_migrate import OperatorStatesDescription
from ..typeutils import SnapshotRegistry
from .convert import ConvertReport, flink_to_parquet
from .flink import FlinkMigrateReport, OperatorDescriptors, inspect_flink_savepoint, migrations, plan_flink_savepoint

MIGRATES_TO = ("canonical", "native")
"""What a migration of a native savepoint or checkpoint writes (``migrate --to``), the default first:
a canonical savepoint restores into either backend and is written by the Spark engine too."""

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
    """Convert the native savepoint or checkpoint ``src`` to ``to`` (``parquet`` | ``canonical`` |
    ``native``) at ``dst``."""
    sp = NativeSavepoint(src, registry)
    if to == "native":
        done = write_native(sp, dst, {}, registry=registry)
        return ConvertReport(str(src), str(dst), "native-to-native", {}, done.rebuilt_instances, done.carried_files)
    if to == "canonical":
        counts = sp.to_canonical(dst)
        streams = sum(1 for _ in sp.instances())
        return ConvertReport(str(src), str(dst), "native-to-canonical", counts, streams, 0)
    report = _through_canonical(sp, dst, lambda canonical: flink_to_parquet(
        canonical, dst, registry=registry, rows_per_file=rows_per_file))
    return ConvertReport(str(src), str(dst), "native-to-parquet", report.states, report.streams,
                         report.carried_files)


def migrate_native(src: str | os.PathLike[str], dst: Any, descriptors: OperatorDescriptors,
                   migrate: Callable[[Path], FlinkMigrateReport], *, to: str = "canonical",
                   registry: SnapshotRegistry | None = None) -> FlinkMigrateReport:
    """The migration of the native savepoint ``src``, planned and checked on ``src`` itself first;
    the report names ``src``. ``to="canonical"``: ``migrate`` (the canonical migration, given the
    staged canonical savepoint); ``to="native"``: a native savepoint
    (:func:`~statemorph.savepoint.flink.native_writer.write_native`)."""
    t0 = time.perf_counter()
    if to not in MIGRATES_TO:
        raise UsageError(f"--to {to}: a native savepoint or checkpoint migrates to {' or '.join(MIGRATES_TO)} only")
    plan = plan_flink_savepoint(src, descriptors, registry=registry, reader=NativeFlinkSavepoint)
    plan.raise_if_incompatible()
    if not isinstance(dst, (str, os.PathLike)):
        raise UsageError(f"{src} is a native savepoint or checkpoint: its migration is written to a local directory")
    if to == "native":
        changes = {}
        for op, sp, envelope, migration in migrations(plan, registry):
            if isinstance(op, OperatorStatesDescription):
                raise UsageError(f"{src}: {op.operator.label()} state {sp.name!r} is operator state, which a "
                                 f"native savepoint written by statemorph does not migrate; migrate --to canonical")
            changes[(op.ident, sp.name)] = (envelope, migration)
        done = write_native(NativeSavepoint(src, registry), dst, changes, registry=registry)
        return FlinkMigrateReport(os.fspath(src), os.fspath(dst), plan, done.migrated, done.rebuilt_instances,
                                  done.carried_files, time.perf_counter() - t0, savepoint_format="native",
                                  writers=done.writers)
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


__all__ = ["MIGRATES_TO", "convert_native", "inspect_native", "migrate_native"]
