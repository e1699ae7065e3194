"""Savepoints: a directory with ``_metadata.json`` and one Parquet dataset per state.

Readers and writers work dataset by dataset (Arrow batches), so bulk engines never need a backend:
:func:`read_metadata`, :func:`state_files`, :func:`iter_state_batches`, :func:`read_state_table`,
:func:`verify_savepoint`, :class:`SavepointWriter`. :func:`check_savepoint` is the dry run.
See :mod:`statemorph.savepoint.format` for the layout.
"""

from __future__ import annotations

from .check import CheckReport, StateCheck, check_savepoint, verify_key_groups
from .format import FORMAT_VERSION, METADATA_FILE, FileEntry, SavepointMetadata, StateMetadata, state_schema
from .reader import iter_state_batches, read_metadata, read_state_table, state_files, verify_savepoint
from .writer import SavepointWriter, StateWriter, remove_stale_temp_dirs

__all__ = [
    "CheckReport",
    "StateCheck",
    "check_savepoint",
    "FORMAT_VERSION",
    "METADATA_FILE",
    "FileEntry",
    "SavepointMetadata",
    "SavepointWriter",
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
