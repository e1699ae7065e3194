"""Savepoint formats behind one description (:mod:`.description`): what the planner needs to
know about each stored state, whatever the files look like.

- :mod:`.parquet`: statemorph's Parquet form (``_metadata.json`` + one Parquet dataset per state);
  its readers and writers work dataset by dataset (Arrow batches), so bulk engines never need a
  backend.
- ``flink/``: Flink's canonical savepoints (``_metadata`` + keyed-state files).

The dry run is the engine's (:func:`statemorph.engine.check_savepoint`): this lower layer never
imports the engine, and which format a savepoint is in is decided once, in
:func:`statemorph.engine.format_of`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .description import SNAPSHOT_ROLES, SavepointDescription, StateDescription

if TYPE_CHECKING:  # resolved lazily at run time (below); type checkers see the names where they live
    from .parquet import (
        FORMAT_VERSION,
        METADATA_FILE,
        FileEntry,
        SavepointMetadata,
        SavepointWriter,
        StateMetadata,
        StateWriter,
        iter_state_batches,
        read_metadata,
        read_state_table,
        remove_stale_temp_dirs,
        state_files,
        state_schema,
        verify_key_groups,
        verify_savepoint,
    )

def __getattr__(name: str) -> Any:
    # The Parquet form's names are resolved on first use: a Spark task on a Flink savepoint
    # imports this package in every fresh Python worker and needs no Parquet (pyarrow.parquet and
    # .compute) there.
    if name in __all__:  # the rest of the public names are the Parquet form's
        from . import parquet

        return getattr(parquet, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "FORMAT_VERSION",
    "FileEntry",
    "METADATA_FILE",
    "SNAPSHOT_ROLES",
    "SavepointDescription",
    "SavepointMetadata",
    "SavepointWriter",
    "StateDescription",
    "StateMetadata",
    "StateWriter",
    "iter_state_batches",
    "read_metadata",
    "read_state_table",
    "remove_stale_temp_dirs",
    "state_files",
    "state_schema",
    "verify_key_groups",
    "verify_savepoint",
]
