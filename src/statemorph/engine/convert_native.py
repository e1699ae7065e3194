"""Converting a native savepoint or a retained checkpoint of Flink's RocksDB backend: into a
canonical savepoint (``--to canonical``), which real Flink restores into either backend, or into
the Parquet form, by way of a canonical savepoint staged beside the destination (removed after),
so the Parquet form keeps what ``convert`` back to Flink needs exactly as for a canonical one."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

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
    parent = Path(dst).absolute().parent
    scratch = Path(tempfile.mkdtemp(prefix=f".{Path(dst).name}.statemorph-canonical-", dir=parent))
    try:
        canonical = scratch / "canonical"
        sp.to_canonical(canonical)
        report = flink_to_parquet(canonical, dst, registry=registry, rows_per_file=rows_per_file)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return ConvertReport(str(src), str(dst), "native-to-parquet", report.states, report.streams,
                         report.carried_files)
