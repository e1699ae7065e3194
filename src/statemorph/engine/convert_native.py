"""Converting and migrating a native savepoint or a retained checkpoint of Flink's RocksDB
backend: into a canonical savepoint (``--to canonical``), which real Flink restores into either
backend; into the Parquet form; or migrated to a new schema as a canonical savepoint. The last
two go by way of a canonical savepoint staged beside the destination and removed after (so the
Parquet form keeps what ``convert`` back to Flink needs, and a migration is the canonical one,
planned on the native savepoint first: an incompatible state stops it before a byte is written)."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..savepoint.flink.native import NativeSavepoint
from ..snapshot import SnapshotRegistry
from .convert import ConvertReport, flink_to_parquet

TARGETS = ("parquet", "canonical")


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


def migrate_native(src: str | os.PathLike[str], dst: Any, plan: Any, migrate: Callable[[Path], Any],
                   t0: float) -> Any:
    """``migrate`` (the canonical migration, given the staged canonical savepoint) of the native
    savepoint ``src`` whose ``plan`` was made and checked on ``src`` itself; the report names ``src``."""
    import time

    if not isinstance(dst, (str, os.PathLike)):
        from ..errors import UsageError

        raise UsageError(f"{src} is a native savepoint or checkpoint: its migration is written to a local directory")
    report = _through_canonical(NativeSavepoint(src), dst, migrate)
    report.source = os.fspath(src)
    report.plan = plan
    report.seconds = time.perf_counter() - t0
    return report


def _through_canonical(sp: NativeSavepoint, dst: str | os.PathLike[str], then: Callable[[Path], Any]) -> Any:
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
